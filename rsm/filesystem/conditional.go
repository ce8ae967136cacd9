package filesystem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rsm"
)

// casLockName is the file at the bucket's root whose flock(2) serialises
// conditional writes, between goroutines and between processes on one
// host: flock locks belong to an open file description, so every
// conditional write opens the file anew. It is never listed as an object.
const casLockName = ".tierd-cas.lock"

// casTmpSuffix names the file a conditional write is staged in; such
// files are not objects, and not incomplete uploads either (a sweep must
// not remove one under a running write).
const casTmpSuffix = ".tierd-cas"

// version names an object's bytes: their SHA-256, hex. Equal bytes have
// equal versions, as S3's ETag of a single-part upload does.
func version(data []byte) rsm.Version {
	sum := sha256.Sum256(data)
	return rsm.Version(hex.EncodeToString(sum[:]))
}

// ReadVersioned implements rsm.ConditionalWriter. An object is replaced by
// rename, so one open file holds one whole version.
func (b *Bucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	p, err := b.path(key)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", b.notFound(key, "")
	}
	if err != nil {
		return nil, "", err
	}
	return data, version(data), nil
}

// PutIfAbsent implements rsm.ConditionalWriter: the bytes go to a
// temporary file (fsynced), which is hard-linked to the object's name;
// link(2) fails when the name exists, so the object appears whole or not
// at all, and only once, even beside a plain Upload.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (rsm.Version, error) {
	return b.putConditional(ctx, key, data, func(p, tmp string) error {
		err := os.Link(tmp, p)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists: %w", key, rsm.ErrPreconditionFailed)
		}
		return err
	})
}

// PutIfMatch implements rsm.ConditionalWriter: under the bucket's flock,
// the current bytes are compared with v and the temporary file renamed
// over the object.
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, v rsm.Version) (rsm.Version, error) {
	return b.putConditional(ctx, key, data, func(p, tmp string) error {
		cur, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is missing: %w", key, rsm.ErrPreconditionFailed)
		}
		if err != nil {
			return err
		}
		if version(cur) != v {
			return fmt.Errorf("%s is not at version %s: %w", key, v, rsm.ErrPreconditionFailed)
		}
		return os.Rename(tmp, p)
	})
}

// putConditional takes the bucket's flock, writes data to "<file>" +
// casTmpSuffix next to key's file (fsynced; a name only the flock holder
// uses, so a crash leaves at most one such file per key, reused by the
// next write), runs commit (which puts it in place or fails) and fsyncs
// the directory.
func (b *Bucket) putConditional(ctx context.Context, key string, data []byte, commit func(p, tmp string) error) (rsm.Version, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, err := b.path(key)
	if err != nil {
		return "", err
	}
	if err := b.rootErr(); err != nil {
		return "", fmt.Errorf("write %s: %w", key, err) // never recreate a vanished root
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	unlock, err := b.casLock()
	if err != nil {
		return "", err
	}
	defer unlock()
	tmp := p + casTmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // after a link or a failure; gone after a rename
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if err := commit(p, tmp); err != nil {
		return "", err
	}
	if err := kafkalog.SyncDir(filepath.Dir(p)); err != nil {
		return "", err
	}
	return version(data), nil
}

// casLock takes the bucket's exclusive flock, waiting for it, and returns
// its release.
func (b *Bucket) casLock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(b.dir, casLockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("filesystem bucket: lock %s: %w", casLockName, err)
	}
	return func() { f.Close() }, nil // closing the last descriptor releases the flock
}
