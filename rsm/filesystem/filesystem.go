// Package filesystem is an rsm.Bucket on a local directory: tierd's
// embedded default, and a way to tier to a mounted network filesystem.
// Each object is one file at <dir>/<key>; an upload is written to a
// temporary file, fsynced and renamed into place, so readers never see a
// partial object. Conditional writes (rsm.ConditionalWriter) hold a
// flock(2) on <dir>/.tierd-cas.lock while they compare and commit, so they
// are atomic between processes on one host; their version is the SHA-256
// of the object's bytes. A listing (Iter, IncompleteUploads) reads only
// the deepest directory its prefix names whole and what lies under it, so
// listing one partition costs that partition's files; Delete removes one
// file and reads no directory (emptied directories stay).
package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/rsm"
)

// Config configures the bucket.
type Config struct {
	// Dir is the bucket's root directory: New creates it when missing,
	// Open requires it. Required.
	Dir string `yaml:"dir"`
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("filesystem bucket: dir is required")
	}
	return nil
}

// Bucket stores objects as files. It records the root directory's device
// and inode when opened; a request that finds the root missing, not a
// directory or not that one (an unmounted mount point) fails with
// ErrRootUnavailable, never rsm.ErrNotFound, and writes nothing.
type Bucket struct {
	dir  string
	root rootID // the root's identity when opened (zero: unknown)
}

// New opens the bucket directory, creating it (and its parents) when
// missing: for tests and embedded uses that own their directory.
// Errors: Validate's, the filesystem's.
func New(cfg Config) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	return Open(cfg)
}

// Open opens an existing bucket directory and records its identity; it
// never creates it, so a missing mount does not turn into writes to the
// filesystem below. Errors: Validate's; a *rsm.BucketError (wrapping
// rsm.ErrMisconfigured) naming the directory when it is missing or not a
// directory.
func Open(cfg Config) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Bucket{dir: cfg.Dir}
	id, err := statRoot(cfg.Dir)
	var re *RootError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &rsm.BucketError{Bucket: b.Name(), Problem: "the directory " + cfg.Dir + " does not exist",
			Fix: "create it (tierd bucket create --config FILE), or mount the filesystem it lives on"}
	case errors.As(err, &re):
		return nil, &rsm.BucketError{Bucket: b.Name(), Problem: "the path " + cfg.Dir + " is not a directory",
			Fix: "set bucket.filesystem.dir to a directory"}
	case err != nil:
		return nil, err
	}
	b.root = id
	return b, nil
}

// Unopened returns a bucket on dir that has not looked at it: for
// CreateBucket, which creates it. Other requests fail until it exists.
func Unopened(cfg Config) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Bucket{dir: cfg.Dir}, nil
}

const tmpSuffix = ".tierd-upload"

func (b *Bucket) path(key string) (string, error) {
	if key == "" || key == casLockName || strings.HasPrefix(key, "/") || strings.HasSuffix(key, tmpSuffix) || strings.HasSuffix(key, casTmpSuffix) {
		return "", fmt.Errorf("filesystem bucket: bad key %q", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "." || part == ".." || part == "" {
			return "", fmt.Errorf("filesystem bucket: bad key %q", key) // would leave the bucket
		}
	}
	return filepath.Join(b.dir, filepath.FromSlash(key)), nil
}

// Upload implements rsm.Bucket: temp file, fsync, rename, fsync dir.
func (b *Bucket) Upload(ctx context.Context, key string, r io.Reader, _ int64) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := b.rootErr(); err != nil {
		return fmt.Errorf("upload %s: %w", key, err) // never recreate a vanished root
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".*"+tmpSuffix)
	if err != nil {
		return err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	done = true
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return kafkalog.SyncDir(filepath.Dir(p))
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// GetRange implements rsm.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", key, off)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, b.notFound(key, "")
	}
	if err != nil {
		return nil, err
	}
	if length < 0 {
		length = 1<<63 - 1 - off
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, length), f}, nil
}

// Attributes implements rsm.Bucket.
func (b *Bucket) Attributes(_ context.Context, key string) (rsm.ObjectAttributes, error) {
	p, err := b.path(key)
	if err != nil {
		return rsm.ObjectAttributes{}, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rsm.ObjectAttributes{}, b.notFound(key, "")
	}
	if err != nil {
		return rsm.ObjectAttributes{}, err
	}
	return rsm.ObjectAttributes{Size: st.Size()}, nil
}

// Iter implements rsm.Bucket. Interrupted uploads are not listed. It
// reads only the directories under prefix (see walkPrefix), so listing
// one partition costs that partition's files, not the bucket's.
func (b *Bucket) Iter(ctx context.Context, prefix string, fn func(string) error) error {
	var keys []string
	err := b.walkPrefix(prefix, func(key string) {
		if !strings.HasSuffix(key, tmpSuffix) && !strings.HasSuffix(key, casTmpSuffix) && key != casLockName {
			keys = append(keys, key)
		}
	})
	if err != nil {
		return err
	}
	return rsm.IterKeys(ctx, keys, fn)
}

// walkPrefix calls fn with the name, relative to the bucket's directory
// and '/'-separated, of every file whose name starts with prefix, in no
// particular order. It reads only the deepest directory the prefix names
// whole ("a/b" for "a/b/c", a partial name) and, under it, the
// subdirectories whose names start with the partial name ("c..."): the
// cost of a listing is the size of that subtree, not of the bucket. A
// prefix whose directory part is not a possible key path (an empty, "."
// or ".." component, a leading '/') matches nothing; a directory the
// prefix names that does not exist holds nothing.
func (b *Bucket) walkPrefix(prefix string, fn func(name string)) error {
	dirPart, partial := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirPart, partial = prefix[:i], prefix[i+1:]
		for _, c := range strings.Split(dirPart, "/") {
			if c == "" || c == "." || c == ".." {
				return nil
			}
		}
	}
	start := filepath.Join(b.dir, filepath.FromSlash(dirPart))
	ents, err := os.ReadDir(start)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return b.rootErr() // an empty listing only while the root is as opened
	}
	if err != nil {
		return err
	}
	keyOf := func(p string) (string, error) {
		rel, err := filepath.Rel(b.dir, p)
		return filepath.ToSlash(rel), err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), partial) {
			continue
		}
		p := filepath.Join(start, e.Name())
		if !e.IsDir() {
			k, err := keyOf(p)
			if err != nil {
				return err
			}
			fn(k)
			continue
		}
		err := filepath.WalkDir(p, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			k, err := keyOf(p)
			if err != nil {
				return err
			}
			fn(k)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Delete implements rsm.Bucket.
func (b *Bucket) Delete(_ context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return b.rootErr() // gone already, unless the whole root is
	} else if err != nil {
		return err
	}
	return nil
}

// Name implements rsm.Bucket.
func (b *Bucket) Name() string { return "filesystem:" + b.dir }

// Close implements rsm.Bucket.
func (b *Bucket) Close() error { return nil }

// IncompleteUploads implements rsm.MultipartBucket: temporary files of
// uploads interrupted by a crash, by name relative to the bucket's
// directory ("<key>.<random>.tierd-upload"). Like Iter it reads only the
// directories under prefix.
func (b *Bucket) IncompleteUploads(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	err := b.walkPrefix(prefix, func(name string) {
		if strings.HasSuffix(name, tmpSuffix) {
			keys = append(keys, name)
		}
	})
	return keys, err
}

// AbortUploadsOfKey implements rsm.MultipartBucket: it removes the
// temporary files of key's interrupted uploads ("<key>.<digits>.tierd-upload"),
// reading only key's directory. Call it only when no upload of key is
// running.
func (b *Bucket) AbortUploadsOfKey(ctx context.Context, key string) (int, error) {
	if _, err := b.path(key); err != nil {
		return 0, err
	}
	stem := key + "."
	keys, err := b.IncompleteUploads(ctx, stem)
	n := 0
	for _, k := range keys {
		mid := strings.TrimSuffix(strings.TrimPrefix(k, stem), tmpSuffix)
		if mid == "" || strings.Trim(mid, "0123456789") != "" {
			continue // another key's (key is a prefix of it)
		}
		if rerr := os.Remove(filepath.Join(b.dir, filepath.FromSlash(k))); rerr != nil && !os.IsNotExist(rerr) {
			return n, rerr
		}
		n++
	}
	return n, err
}

// AbortIncompleteUploads implements rsm.MultipartBucket. Call it only when
// no upload under prefix is running.
func (b *Bucket) AbortIncompleteUploads(ctx context.Context, prefix string) error {
	keys, err := b.IncompleteUploads(ctx, prefix)
	for _, k := range keys {
		if rerr := os.Remove(filepath.Join(b.dir, filepath.FromSlash(k))); rerr != nil && !os.IsNotExist(rerr) {
			return rerr
		}
	}
	return err
}
