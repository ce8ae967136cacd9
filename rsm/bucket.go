package rsm

import (
	"context"
	"errors"
	"io"
	"sort"
)

// Errors of every Bucket.
var (
	// ErrNotFound is returned (wrapped) for a missing object.
	ErrNotFound = errors.New("rsm: object not found")
	// ErrPreconditionFailed is returned (wrapped) by a conditional write
	// whose condition did not hold: the object exists (PutIfAbsent), or
	// it is missing or at another version (PutIfMatch). Nothing was
	// written.
	ErrPreconditionFailed = errors.New("rsm: precondition failed")
	// ErrUnreachable marks (wrapped) a request that found the whole store
	// unavailable (a filesystem bucket's root directory gone or replaced),
	// as opposed to one object missing: it is never evidence about an
	// object, and callers treat it as they treat a store that does not
	// answer.
	ErrUnreachable = errors.New("rsm: object store unreachable")
)

// ObjectAttributes describes a stored object.
type ObjectAttributes struct {
	Size int64 // bytes
}

// BucketReader reads objects. Keys are '/'-separated paths without a
// leading '/'.
type BucketReader interface {
	// GetRange returns length bytes of key starting at byte off; length -1
	// reads to the end. A range past the end is cut short, not an error.
	// The body's Close may be called while a Read of it waits (from
	// another goroutine: chunked.NewReadAhead, the chunk cache's loads),
	// and must end that Read, even with ctx still live
	// (rsmtest.ExerciseCloseStalledBody).
	// Errors: ErrNotFound (wrapped), transport errors.
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Attributes returns the object's size, or ErrNotFound.
	Attributes(ctx context.Context, key string) (ObjectAttributes, error)
	// Iter calls fn with every key under prefix, at any depth, in
	// lexical order. An error from fn stops the walk and is returned.
	Iter(ctx context.Context, prefix string, fn func(key string) error) error
}

// Version names one stored state of an object, for conditional writes:
// the ETag on S3 and MinIO, an opaque token elsewhere. Only equality
// between versions of the same key means anything. Two writes of the same
// bytes may get the same version (S3's ETag of a single-part upload is the
// MD5 of the bytes), so a caller that must tell writes apart puts
// something new in every write (the ownership lease carries a generation).
type Version string

// ConditionalWriter reads and writes small objects (a few KiB, held in
// memory) with compare-and-swap semantics, as S3's conditional writes
// give: a write with "If-None-Match: *" creates only an absent object, one
// with "If-Match: <etag>" replaces only that version. Of several writers
// racing with the same condition, at most one succeeds; the others get
// ErrPreconditionFailed. The write is all or nothing, like Upload.
type ConditionalWriter interface {
	// ReadVersioned returns the object's bytes and their version.
	// Errors: ErrNotFound (wrapped), transport errors.
	ReadVersioned(ctx context.Context, key string) ([]byte, Version, error)
	// PutIfAbsent stores data under key only when no object is stored
	// there, and returns the new version. Errors: ErrPreconditionFailed
	// (wrapped) when the key exists, transport errors.
	PutIfAbsent(ctx context.Context, key string, data []byte) (Version, error)
	// PutIfMatch replaces the object under key only when its version is
	// v, and returns the new version. Errors: ErrPreconditionFailed
	// (wrapped) when the object is at another version or missing,
	// transport errors.
	PutIfMatch(ctx context.Context, key string, data []byte, v Version) (Version, error)
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
	ConditionalWriter
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
	// AbortUploadsOfKey aborts every upload in progress of exactly key
	// (not of keys it is a prefix of), found by a listing of that key's
	// uploads alone (S3's ListMultipartUploads with the key as prefix),
	// never of the bucket, and returns how many it aborted. MinIO lists
	// by prefix only the uploads of an exact key, and in a bucket-wide
	// listing only the uploads its running process began: an upload a
	// store outage cut off is found after the store's restart by its
	// exact key alone. An upload already gone (aborted or completed
	// meanwhile) is not an error. Errors: the listing's or an abort's.
	AbortUploadsOfKey(ctx context.Context, key string) (int, error)
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
