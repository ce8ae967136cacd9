package bench

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/rsm"
)

// countingBucket counts every request made to the bucket it wraps (each
// method call is one request, or more for a multipart upload or a
// listing of many pages; a call is what tierd asks for).
type countingBucket struct {
	rsm.Bucket
	n atomic.Int64
}

func (b *countingBucket) requests() int64 { return b.n.Load() }

func (b *countingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.n.Add(1)
	return b.Bucket.GetRange(ctx, key, off, length)
}

func (b *countingBucket) Attributes(ctx context.Context, key string) (rsm.ObjectAttributes, error) {
	b.n.Add(1)
	return b.Bucket.Attributes(ctx, key)
}

func (b *countingBucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	b.n.Add(1)
	return b.Bucket.Iter(ctx, prefix, fn)
}

func (b *countingBucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	b.n.Add(1)
	return b.Bucket.ReadVersioned(ctx, key)
}

func (b *countingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	b.n.Add(1)
	return b.Bucket.PutIfAbsent(ctx, key, data)
}

func (b *countingBucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	b.n.Add(1)
	return b.Bucket.PutIfMatch(ctx, key, data, v)
}

func (b *countingBucket) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	b.n.Add(1)
	return b.Bucket.Upload(ctx, key, r, size)
}

func (b *countingBucket) Delete(ctx context.Context, key string) error {
	b.n.Add(1)
	return b.Bucket.Delete(ctx, key)
}

// IncompleteUploads and AbortIncompleteUploads pass through when the
// wrapped bucket has them (both the filesystem and the S3 bucket do), so
// that tierd behaves as it does unwrapped.
func (b *countingBucket) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	mb, ok := b.Bucket.(rsm.MultipartBucket)
	if !ok {
		return nil, nil
	}
	b.n.Add(1)
	return mb.IncompleteUploads(ctx, prefix)
}

func (b *countingBucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	mb, ok := b.Bucket.(rsm.MultipartBucket)
	if !ok {
		return nil
	}
	b.n.Add(1)
	return mb.AbortIncompleteUploads(ctx, prefix)
}

// syncFS counts the syncs (fsync, fdatasync, sync_file_range) of the
// files Pebble writes through it: the metadata store syncs its WAL once
// per write it acknowledges, so the count is its synced writes (and
// the rare sync of a new file or directory). The rlmm store has no
// counter of its own for them.
type syncFS struct {
	vfs.FS
	n *atomic.Int64
}

type syncFile struct {
	vfs.File
	n *atomic.Int64
}

func (f syncFile) Sync() error { f.n.Add(1); return f.File.Sync() }

func (f syncFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }

func (f syncFile) SyncTo(length int64) (bool, error) { f.n.Add(1); return f.File.SyncTo(length) }

func (fs syncFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return syncFile{File: f, n: fs.n}, nil
}

func (fs syncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs syncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs syncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs syncFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs syncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs syncFS) Unwrap() vfs.FS { return fs.FS }
