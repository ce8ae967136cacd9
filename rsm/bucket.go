package rsm

import (
	"context"
	"errors"
	"io"
	"sort"
)

// ErrNotFound is returned (wrapped) by every Bucket for a missing object.
var ErrNotFound = errors.New("rsm: object not found")

// ObjectAttributes describes a stored object.
type ObjectAttributes struct {
	Size int64 // bytes
}

// BucketReader reads objects. Keys are '/'-separated paths without a
// leading '/'.
type BucketReader interface {
	// GetRange returns length bytes of key starting at byte off; length -1
	// reads to the end. A range past the end is cut short, not an error.
	// Errors: ErrNotFound (wrapped), transport errors.
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Attributes returns the object's size, or ErrNotFound.
	Attributes(ctx context.Context, key string) (ObjectAttributes, error)
	// Iter calls fn with every key under prefix, at any depth, in
	// lexical order. An error from fn stops the walk and is returned.
	Iter(ctx context.Context, prefix string, fn func(key string) error) error
}

// Bucket is the small object-store interface tierd needs. Its contract,
// as Kafka's RemoteStorageManager states for copies:
//   - Upload is all or nothing: the object becomes visible complete, or
//     not at all (a failed multipart upload is aborted). Uploading the same
//     key twice replaces it; tierd never does, every copy has a new key.
//   - Delete of a missing object is not an error.
//   - Implementations are safe for concurrent use.
type Bucket interface {
	BucketReader
	// Upload stores r under key. size is the byte count when known, or
	// -1. Large objects go up in parts, streamed: an implementation holds
	// at most its configured part size times its part concurrency in
	// memory.
	Upload(ctx context.Context, key string, r io.Reader, size int64) error
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Name describes the bucket for logs (no credentials).
	Name() string
	// Close releases the client.
	Close() error
}

// MultipartBucket is implemented by buckets that can list and abort
// incomplete multipart uploads (S3, MinIO). A copy that fails or is
// killed mid-upload can leave parts stored, and billed, until aborted.
type MultipartBucket interface {
	// IncompleteUploads lists the keys under prefix with an upload in
	// progress.
	IncompleteUploads(ctx context.Context, prefix string) ([]string, error)
	// AbortIncompleteUploads aborts every upload in progress under prefix.
	AbortIncompleteUploads(ctx context.Context, prefix string) error
}

// IterKeys calls fn with keys in lexical order, stopping at ctx's end or
// fn's first error: the tail of Iter for buckets that list keys themselves.
func IterKeys(ctx context.Context, keys []string, fn func(key string) error) error {
	sort.Strings(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}
