package rsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Errors of the recording bucket.
var (
	// ErrPrefixNotEmpty is returned (wrapped, naming what was found) by
	// ClaimPrefix when the prefix already holds an object or an incomplete
	// upload.
	ErrPrefixNotEmpty = errors.New("rsm: prefix is not empty")
	// ErrOutsidePrefix is returned (wrapped) by a RecordingBucket asked to
	// write, delete or abort outside its claimed prefix.
	ErrOutsidePrefix = errors.New("rsm: key outside the claimed prefix")
	// ErrLeftBehind is returned (wrapped, naming the keys) by
	// DeleteWritten when objects not uploaded through the RecordingBucket
	// remain under the claimed prefix; they are left alone.
	ErrLeftBehind = errors.New("rsm: objects left under the claimed prefix")
)

// RecordingBucket is a Bucket decorator for tools that write into a
// bucket they share with others (tierd demo, tierd bench): it confines
// every write, delete and abort to one claimed prefix, and records the key
// of every upload made through it, so that DeleteWritten can remove
// exactly the objects the tool wrote. It never deletes by listing: an
// object it did not upload is never deleted by DeleteWritten. Reads pass
// through unchanged. Safe for concurrent use.
type RecordingBucket struct {
	Bucket
	prefix string // the claimed prefix, ending in '/'
	mu     sync.Mutex
	keys   map[string]struct{}
}

// ClaimPrefix checks that b holds no object and no incomplete multipart
// upload under prefix (a Config.Prefix: not empty, no leading or trailing
// '/'), and returns a RecordingBucket confined to it. The check is what
// makes the prefix the tool's own: choose a prefix unique to the run.
// Errors: a bad prefix, ErrPrefixNotEmpty (wrapped, with the first key
// found), or the bucket's listing error.
func ClaimPrefix(ctx context.Context, b Bucket, prefix string) (*RecordingBucket, error) {
	if prefix == "" {
		return nil, errors.New("rsm: a claimed prefix must not be empty")
	}
	if err := (Config{Prefix: prefix}).Validate(); err != nil {
		return nil, err
	}
	dir := prefix + "/"
	errFound := errors.New("found")
	var first string
	err := b.Iter(ctx, dir, func(k string) error { first = k; return errFound })
	if err != nil && !errors.Is(err, errFound) {
		return nil, fmt.Errorf("list %s in %s: %w", dir, b.Name(), err)
	}
	if first != "" {
		return nil, fmt.Errorf("%w: %s in %s holds %s", ErrPrefixNotEmpty, dir, b.Name(), first)
	}
	if mb, ok := b.(MultipartBucket); ok {
		ups, err := mb.IncompleteUploads(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("list incomplete uploads under %s in %s: %w", dir, b.Name(), err)
		}
		if len(ups) > 0 {
			return nil, fmt.Errorf("%w: %s in %s has an incomplete upload of %s", ErrPrefixNotEmpty, dir, b.Name(), ups[0])
		}
	}
	return &RecordingBucket{Bucket: b, prefix: dir, keys: map[string]struct{}{}}, nil
}

// Prefix returns the claimed prefix, ending in '/'.
func (r *RecordingBucket) Prefix() string { return r.prefix }

func (r *RecordingBucket) inside(key string) error {
	if !strings.HasPrefix(key, r.prefix) {
		return fmt.Errorf("%w: %q is not under %s", ErrOutsidePrefix, key, r.prefix)
	}
	return nil
}

// Upload records key, then uploads through the wrapped bucket. The key is
// recorded before the upload, so an upload that fails after the store
// kept the object is still deleted by DeleteWritten. Errors:
// ErrOutsidePrefix (wrapped), or the wrapped bucket's.
func (r *RecordingBucket) Upload(ctx context.Context, key string, rd io.Reader, size int64) error {
	if err := r.inside(key); err != nil {
		return err
	}
	r.mu.Lock()
	r.keys[key] = struct{}{}
	r.mu.Unlock()
	return r.Bucket.Upload(ctx, key, rd, size)
}

// Delete deletes key through the wrapped bucket. Errors: ErrOutsidePrefix
// (wrapped), or the wrapped bucket's.
func (r *RecordingBucket) Delete(ctx context.Context, key string) error {
	if err := r.inside(key); err != nil {
		return err
	}
	return r.Bucket.Delete(ctx, key)
}

// IncompleteUploads implements MultipartBucket: the wrapped bucket's, or
// none when it has no multipart uploads.
func (r *RecordingBucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	if mb, ok := r.Bucket.(MultipartBucket); ok {
		return mb.IncompleteUploads(ctx, prefix)
	}
	return nil, nil
}

// AbortIncompleteUploads implements MultipartBucket for a prefix inside
// the claimed one. Errors: ErrOutsidePrefix (wrapped), or the wrapped
// bucket's.
func (r *RecordingBucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	if err := r.inside(prefix); err != nil {
		return err
	}
	if mb, ok := r.Bucket.(MultipartBucket); ok {
		return mb.AbortIncompleteUploads(ctx, prefix)
	}
	return nil
}

// AbortUploadsOfKey implements MultipartBucket for a key inside the
// claimed prefix. Errors: ErrOutsidePrefix (wrapped), or the wrapped
// bucket's.
func (r *RecordingBucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	if err := r.inside(key); err != nil {
		return 0, err
	}
	if mb, ok := r.Bucket.(MultipartBucket); ok {
		return mb.AbortUploadsOfKey(ctx, key)
	}
	return 0, nil
}

// Written returns the keys uploaded through r, sorted.
func (r *RecordingBucket) Written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.keys))
	for k := range r.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DeleteWritten deletes every key uploaded through r (manifests first, so
// that a half-deleted copy never looks complete; a key already gone is
// fine) and aborts the incomplete multipart uploads under the claimed
// prefix, which ClaimPrefix found free of them. Its proof for each delete
// is the record of the upload. It then lists the claimed prefix: any
// object still there was not written through r and is reported as
// ErrLeftBehind (wrapped, with the keys), never deleted. It returns the
// number of keys deleted and every error, joined.
func (r *RecordingBucket) DeleteWritten(ctx context.Context) (int, error) {
	keys := r.Written()
	sort.SliceStable(keys, func(i, j int) bool {
		return strings.HasSuffix(keys[i], manifestSuffix) && !strings.HasSuffix(keys[j], manifestSuffix)
	})
	var errs []error
	n := 0
	for _, k := range keys {
		if err := r.Bucket.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", k, err))
			continue
		}
		n++
	}
	if mb, ok := r.Bucket.(MultipartBucket); ok {
		if err := mb.AbortIncompleteUploads(ctx, r.prefix); err != nil {
			errs = append(errs, fmt.Errorf("abort incomplete uploads under %s: %w", r.prefix, err))
		}
	}
	var left []string
	if err := r.Bucket.Iter(ctx, r.prefix, func(k string) error { left = append(left, k); return nil }); err != nil {
		errs = append(errs, fmt.Errorf("list %s: %w", r.prefix, err))
	} else if len(left) > 0 {
		shown := left
		if len(shown) > 5 {
			shown = shown[:5]
		}
		errs = append(errs, fmt.Errorf("%w: %d object(s) under %s in %s were not uploaded through this client and were kept: %s",
			ErrLeftBehind, len(left), r.prefix, r.Bucket.Name(), strings.Join(shown, ", ")))
	}
	return n, errors.Join(errs...)
}
