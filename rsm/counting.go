package rsm

import (
	"context"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CountingBucket is an Bucket decorator that counts the calls made to
// each method of the wrapped bucket (and of MultipartBucket, when the
// wrapped bucket is one): the requests a code path sends, for tests that
// check how that number grows. A call counts once whatever it costs the
// store; Iter and IncompleteUploads are the listings. Safe for concurrent
// use.
type CountingBucket struct {
	Bucket
	mu    sync.Mutex
	calls map[string]int
}

// Count wraps b.
func Count(b Bucket) *CountingBucket {
	return &CountingBucket{Bucket: b, calls: map[string]int{}}
}

// Total returns the number of calls counted since the last Reset, of all
// methods.
func (c *CountingBucket) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *CountingBucket) note(method string) {
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
}

// Calls returns the calls counted since the last Reset, by method name
// ("Delete", "Iter", "IncompleteUploads", ...).
func (c *CountingBucket) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// Listings returns the listing calls (Iter, IncompleteUploads and
// AbortIncompleteUploads, which lists before it aborts) counted since the
// last Reset.
func (c *CountingBucket) Listings() int {
	calls := c.Calls()
	return calls["Iter"] + calls["IncompleteUploads"] + calls["AbortIncompleteUploads"]
}

// Reset clears the counts.
func (c *CountingBucket) Reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
}

// String lists the counts, sorted by method: "Delete=7 Iter=1".
func (c *CountingBucket) String() string {
	calls := c.Calls()
	var parts []string
	for k, v := range calls {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Upload implements Bucket.
func (c *CountingBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	c.note("Upload")
	return c.Bucket.Upload(ctx, key, r, size)
}

// GetRange implements Bucket.
func (c *CountingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c.note("GetRange")
	return c.Bucket.GetRange(ctx, key, off, length)
}

// Attributes implements Bucket.
func (c *CountingBucket) Attributes(ctx context.Context, key string) (ObjectAttributes, error) {
	c.note("Attributes")
	return c.Bucket.Attributes(ctx, key)
}

// Iter implements Bucket.
func (c *CountingBucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	c.note("Iter")
	return c.Bucket.Iter(ctx, prefix, fn)
}

// Delete implements Bucket.
func (c *CountingBucket) Delete(ctx context.Context, key string) error {
	c.note("Delete")
	return c.Bucket.Delete(ctx, key)
}

// ReadVersioned implements ConditionalWriter.
func (c *CountingBucket) ReadVersioned(ctx context.Context, key string) ([]byte, Version, error) {
	c.note("ReadVersioned")
	return c.Bucket.ReadVersioned(ctx, key)
}

// PutIfAbsent implements ConditionalWriter.
func (c *CountingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (Version, error) {
	c.note("PutIfAbsent")
	return c.Bucket.PutIfAbsent(ctx, key, data)
}

// PutIfMatch implements ConditionalWriter.
func (c *CountingBucket) PutIfMatch(ctx context.Context, key string, data []byte, v Version) (Version, error) {
	c.note("PutIfMatch")
	return c.Bucket.PutIfMatch(ctx, key, data, v)
}

// IncompleteUploads implements MultipartBucket: the wrapped bucket's,
// or none when it has no multipart uploads.
func (c *CountingBucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	c.note("IncompleteUploads")
	if mb, ok := c.Bucket.(MultipartBucket); ok {
		return mb.IncompleteUploads(ctx, prefix)
	}
	return nil, nil
}

// AbortIncompleteUploads implements MultipartBucket: the wrapped
// bucket's, or nothing when it has no multipart uploads.
func (c *CountingBucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	c.note("AbortIncompleteUploads")
	if mb, ok := c.Bucket.(MultipartBucket); ok {
		return mb.AbortIncompleteUploads(ctx, prefix)
	}
	return nil
}

// AbortUploadsOfKey implements MultipartBucket: the wrapped bucket's, or
// nothing when it has no multipart uploads. It lists one key's uploads,
// not a prefix's, and is not counted among Listings.
func (c *CountingBucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	c.note("AbortUploadsOfKey")
	if mb, ok := c.Bucket.(MultipartBucket); ok {
		return mb.AbortUploadsOfKey(ctx, key)
	}
	return 0, nil
}
