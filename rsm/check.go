package rsm

import (
	"context"
	"errors"
	"strings"
)

// ErrMisconfigured marks a bucket that cannot work as configured: it does
// not exist, or the credentials are missing, unknown to the store or
// refused. Retrying does not help; an operator must act (*BucketError
// says how).
var ErrMisconfigured = errors.New("rsm: bucket misconfigured")

// Checker is implemented by buckets that can check their configuration
// against the store with one cheap request (S3, MinIO).
type Checker interface {
	// Check returns nil when the bucket exists and the credentials may
	// list keys under prefix. Errors: *BucketError (wrapping ErrMisconfigured) for a
	// missing bucket or bad credentials; transport errors (the store is
	// unreachable) as they are.
	Check(ctx context.Context, prefix string) error
}

// Creator is implemented by buckets that can create themselves.
type Creator interface {
	// CreateBucket creates the configured bucket. It reports false, and
	// no error, when the bucket exists and is the caller's. Errors:
	// *BucketError for bad credentials, the store's.
	CreateBucket(ctx context.Context) (created bool, err error)
}

// BucketError says what is wrong with a bucket's configuration and how to
// fix it. It never holds a secret: Credentials names where credentials
// were looked for, which source was used and the access key id.
type BucketError struct {
	Bucket      string // Bucket.Name()
	Problem     string // e.g. "the bucket does not exist"
	Credentials string // "" when they are not in question
	Fix         string
	Err         error // the store's answer
}

func (e *BucketError) Error() string {
	var b strings.Builder
	b.WriteString(e.Bucket + ": " + e.Problem)
	if e.Err != nil {
		b.WriteString(" (" + e.Err.Error() + ")")
	}
	if e.Credentials != "" {
		b.WriteString("; credentials: " + e.Credentials)
	}
	if e.Fix != "" {
		b.WriteString("; to fix: " + e.Fix)
	}
	return b.String()
}

func (e *BucketError) Unwrap() []error { return []error{ErrMisconfigured, e.Err} }

// CheckStore asks the bucket, when it is a Checker, whether the store is
// up and configured (Checker.Check under the manager's prefix); a bucket
// without a check is taken to be up. Callers ask before they treat an
// object found missing as evidence. Errors: Check's.
func (m *Manager) CheckStore(ctx context.Context) error {
	if c, ok := m.b.(Checker); ok {
		return c.Check(ctx, m.cfg.Prefix)
	}
	return nil
}
