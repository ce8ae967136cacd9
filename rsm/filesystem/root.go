package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/tierd/tierd/rsm"
)

// ErrRootUnavailable marks a request that found the bucket's root
// directory missing, not a directory, or not the directory the bucket
// opened (another filesystem mounted there, or unmounted and a new
// directory in its place). It is the whole store being unreachable, never
// evidence that one object is missing: requests return it in place of
// rsm.ErrNotFound, and it wraps rsm.ErrUnreachable.
var ErrRootUnavailable = errors.New("filesystem: bucket root directory unavailable")

// rootID is a directory's identity: the device and inode stat(2) gives.
type rootID struct{ dev, ino uint64 }

// statRoot returns dir's identity. Errors: the stat's, or a *RootError
// when dir is not a directory.
func statRoot(dir string) (rootID, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return rootID{}, err
	}
	if !st.IsDir() {
		return rootID{}, &RootError{Dir: dir, Problem: "is not a directory"}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return rootID{dev: uint64(sys.Dev), ino: uint64(sys.Ino)}, nil
	}
	return rootID{}, nil
}

// RootError says what is wrong with the bucket's root directory.
type RootError struct {
	Dir     string
	Problem string // e.g. "is missing (moved away, or its filesystem unmounted)"
	Err     error  // the stat's error, if any
}

func (e *RootError) Error() string {
	s := "bucket directory " + e.Dir + " " + e.Problem
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *RootError) Unwrap() []error { return []error{ErrRootUnavailable, rsm.ErrUnreachable, e.Err} }

// rootErr returns nil when the bucket's root directory is there and is
// the one New or Open found (same device and inode), else a *RootError.
func (b *Bucket) rootErr() error {
	id, err := statRoot(b.dir)
	var re *RootError
	switch {
	case errors.As(err, &re):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &RootError{Dir: b.dir, Problem: "is missing (moved away, or its filesystem unmounted)"}
	case err != nil:
		return &RootError{Dir: b.dir, Problem: "cannot be examined", Err: err}
	case b.root != (rootID{}) && id != b.root:
		return &RootError{Dir: b.dir, Problem: fmt.Sprintf("is not the directory tierd opened (device %d inode %d, opened as device %d inode %d): another filesystem is mounted there, or it was unmounted or replaced", id.dev, id.ino, b.root.dev, b.root.ino)}
	}
	return nil
}

// notFound returns the error for key's file found missing: rsm.ErrNotFound
// (wrapped) when the root directory is as opened, else the root's error.
func (b *Bucket) notFound(key, what string) error {
	if err := b.rootErr(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return fmt.Errorf("%s%s: %w", key, what, rsm.ErrNotFound)
}

// Check implements rsm.Checker: nil when the root directory is present,
// a directory, and the one the bucket opened; else a *RootError (wrapping
// ErrRootUnavailable and rsm.ErrUnreachable). It reads no directory.
func (b *Bucket) Check(ctx context.Context, _ string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.rootErr()
}

// CreateBucket implements rsm.Creator: it creates the root directory
// (and its parents) when missing, reporting whether it did, and records
// its identity. Errors: the filesystem's; a *RootError when the path is
// not a directory.
func (b *Bucket) CreateBucket(context.Context) (bool, error) {
	_, err := statRoot(b.dir)
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(b.dir, 0o755); err != nil {
			return false, err
		}
		created = true
	} else if err != nil {
		return false, err
	}
	id, err := statRoot(b.dir)
	if err != nil {
		return created, err
	}
	b.root = id
	return created, nil
}
