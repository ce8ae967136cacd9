// Package memory is an in-memory rsm.Bucket for fast unit tests.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/tierd/tierd/rsm"
)

// Bucket keeps objects in a map.
type Bucket struct {
	mu   sync.RWMutex
	objs map[string][]byte
	vers map[string]uint64 // the write that stored each object
	gen  uint64            // writes so far
}

// New returns an empty bucket.
func New() *Bucket { return &Bucket{objs: map[string][]byte{}, vers: map[string]uint64{}} }

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
	b.store(key, data)
	return nil
}

// store keeps data under key with a new version; b.mu is held.
func (b *Bucket) store(key string, data []byte) rsm.Version {
	b.gen++
	b.objs[key], b.vers[key] = data, b.gen
	return rsm.Version(strconv.FormatUint(b.gen, 10))
}

// ReadVersioned implements rsm.ConditionalWriter. The version is the
// number of the write that stored the object, new for every write.
func (b *Bucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	data, ok := b.objs[key]
	if !ok {
		return nil, "", fmt.Errorf("%s: %w", key, rsm.ErrNotFound)
	}
	return bytes.Clone(data), rsm.Version(strconv.FormatUint(b.vers[key], 10)), nil
}

// PutIfAbsent implements rsm.ConditionalWriter.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[key]; ok {
		return "", fmt.Errorf("%s exists: %w", key, rsm.ErrPreconditionFailed)
	}
	return b.store(key, bytes.Clone(data)), nil
}

// PutIfMatch implements rsm.ConditionalWriter.
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[key]; !ok || rsm.Version(strconv.FormatUint(b.vers[key], 10)) != v {
		return "", fmt.Errorf("%s is not at version %s: %w", key, v, rsm.ErrPreconditionFailed)
	}
	return b.store(key, bytes.Clone(data)), nil
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
	delete(b.vers, key)
	return nil
}

// Name implements rsm.Bucket.
func (b *Bucket) Name() string { return "memory" }

// Close implements rsm.Bucket.
func (b *Bucket) Close() error { return nil }
