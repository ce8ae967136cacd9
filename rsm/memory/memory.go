// Package memory is an in-memory rsm.Bucket for fast unit tests.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/tierd/tierd/rsm"
)

// Bucket keeps objects in a map.
type Bucket struct {
	mu   sync.RWMutex
	objs map[string][]byte
}

// New returns an empty bucket.
func New() *Bucket { return &Bucket{objs: map[string][]byte{}} }

// Upload implements rsm.Bucket.
func (b *Bucket) Upload(ctx context.Context, key string, r io.Reader, _ int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objs[key] = data
	return nil
}

// GetRange implements rsm.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.RLock()
	data, ok := b.objs[key]
	b.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, rsm.ErrNotFound)
	}
	if off < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", key, off)
	}
	off = min(off, int64(len(data)))
	end := int64(len(data))
	if length >= 0 {
		end = min(end, off+length)
	}
	return io.NopCloser(bytes.NewReader(data[off:end])), nil
}

// Attributes implements rsm.Bucket.
func (b *Bucket) Attributes(_ context.Context, key string) (rsm.ObjectAttributes, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	data, ok := b.objs[key]
	if !ok {
		return rsm.ObjectAttributes{}, fmt.Errorf("%s: %w", key, rsm.ErrNotFound)
	}
	return rsm.ObjectAttributes{Size: int64(len(data))}, nil
}

// Iter implements rsm.Bucket.
func (b *Bucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	b.mu.RLock()
	var keys []string
	for k := range b.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	b.mu.RUnlock()
	return rsm.IterKeys(ctx, keys, fn)
}

// Delete implements rsm.Bucket.
func (b *Bucket) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs, key)
	return nil
}

// Name implements rsm.Bucket.
func (b *Bucket) Name() string { return "memory" }

// Close implements rsm.Bucket.
func (b *Bucket) Close() error { return nil }
