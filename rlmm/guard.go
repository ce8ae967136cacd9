package rlmm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// guardFS is the filesystem one Pebble instance writes through. Pebble
// treats a failed write as fatal (a failed WAL or MANIFEST write ends in
// Logger.Fatalf) or retries it without pause (a failed flush is
// rescheduled at once, for ever: the loop behind thousands of identical
// log lines a second, and behind an Open that never returns). guardFS
// keeps those errors from Pebble: the first write that fails marks the
// instance dead, with the error as its cause, and parks the goroutine
// that made it; so does every later write of the dead instance, failing
// or not, so that it cannot touch files a new instance of the same
// directory uses. The Store then answers writes with the cause, serves
// reads from the dead instance's memory and files, and opens a new
// instance once the directory takes writes again (see recoverLoop).
// That is what a crash at the failed write and a restart would do, minus
// the restart: Pebble recovers from its WAL either way. Once the new
// instance is in use, the dead one is retired (see retire): its parked
// writes return the cause without touching the filesystem, and it is
// closed.
//
// Writes are Create, Link, OpenReadWrite, Remove, RemoveAll, Rename,
// ReuseForWrite, MkdirAll and, on files, Write, WriteAt, Preallocate and
// the syncs. A failing write is any error other than "not exist" or
// "exists", which Pebble expects and handles (a sync fails on any error:
// Linux may drop the dirty pages of a failed fsync, so retrying one is
// never safe), and "not exist" too when the file's directory is gone
// (errDirGone: the store's directory was removed). Reads, Lock and Close
// pass through.
type guardFS struct {
	inner vfs.FS
	in    *instance
}

// instance is one open Pebble instance of the store's directory.
type instance struct {
	db   *pebble.DB
	dead chan struct{} // closed when a write failed
	once sync.Once
	// cause is the first failure; set before dead is closed.
	cause error
	// inflight counts writes under way, parked ones included; parked
	// counts the parked ones. When they are equal, nothing of this
	// instance can write any more.
	inflight, parked atomic.Int64
	lock             atomic.Pointer[onceCloser] // the directory lock, once this instance took it
	onFail           func(*instance)            // told once, after dead is closed
	retrying         sync.Once                  // the store's retries for this instance start once
	// release is closed when a dead instance is retired: parked writes
	// (and Fatalf) return then, and later writes fail at once, none of
	// them touching the filesystem.
	release     chan struct{}
	releaseOnce sync.Once
	// readers counts the reads under way on db (see Store.read).
	readers atomic.Int64
}

func newInstance() *instance {
	return &instance{dead: make(chan struct{}), release: make(chan struct{})}
}

// fail marks the instance dead; the first cause wins. It reports whether
// this call did it.
func (in *instance) fail(cause error) (first bool) {
	in.once.Do(func() {
		in.cause = cause
		close(in.dead)
		first = true
	})
	if first && in.onFail != nil {
		in.onFail(in)
	}
	return first
}

func (in *instance) isDead() bool {
	select {
	case <-in.dead:
		return true
	default:
		return false
	}
}

// quiet reports whether every write of a dead instance has parked.
func (in *instance) quiet() bool { return in.inflight.Load() == in.parked.Load() }

// park blocks the calling goroutine until the instance is retired: it
// is dead, and the goroutine belongs to Pebble, which must not see the
// error while a new instance may be opening the directory.
func (in *instance) park() {
	in.parked.Add(1)
	<-in.release
	in.parked.Add(-1)
}

// write runs one write of the instance: parked if the instance is dead,
// else done, and parked after marking the instance dead if it failed.
// Once the instance is retired, a parked write returns an error with the
// instance's cause, fn never run.
func (g *guardFS) write(op, path string, sync bool, fn func() error) error {
	g.in.inflight.Add(1)
	defer g.in.inflight.Add(-1)
	if g.in.isDead() {
		g.in.park()
		return &os.PathError{Op: op, Path: path, Err: fmt.Errorf("rlmm: write of a retired instance: %w", g.in.cause)}
	}
	err := fn()
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if _, serr := g.inner.Stat(g.inner.PathDir(path)); errors.Is(serr, fs.ErrNotExist) {
			// The store's directory was removed: Pebble expects a missing
			// file, never a missing directory (its WAL rotation panics on
			// a file it cannot create or reuse there).
			err = &os.PathError{Op: op, Path: path, Err: fmt.Errorf("%w: %w", errDirGone, err)}
			g.in.fail(err)
			g.in.park()
			return err
		}
	}
	if err != nil && (sync || !expected(err)) {
		var pe *os.PathError
		if !errors.As(err, &pe) {
			err = &os.PathError{Op: op, Path: path, Err: err}
		}
		g.in.fail(err)
		g.in.park()
	}
	return err
}

// expected reports the errors Pebble looks for and handles itself.
func expected(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist)
}

func (g *guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := g.write("create", name, false, func() (err error) { f, err = g.inner.Create(name, c); return err })
	return g.file(f, name), err
}

func (g *guardFS) Link(oldname, newname string) error {
	return g.write("link", newname, false, func() error { return g.inner.Link(oldname, newname) })
}

func (g *guardFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.inner.Open(name, opts...)
	return g.file(f, name), err
}

func (g *guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	var f vfs.File
	err := g.write("open", name, false, func() (err error) { f, err = g.inner.OpenReadWrite(name, c, opts...); return err })
	return g.file(f, name), err
}

func (g *guardFS) OpenDir(name string) (vfs.File, error) {
	f, err := g.inner.OpenDir(name)
	return g.file(f, name), err
}

func (g *guardFS) Remove(name string) error {
	return g.write("remove", name, false, func() error { return g.inner.Remove(name) })
}

func (g *guardFS) RemoveAll(name string) error {
	return g.write("remove", name, false, func() error { return g.inner.RemoveAll(name) })
}

func (g *guardFS) Rename(oldname, newname string) error {
	return g.write("rename", newname, false, func() error { return g.inner.Rename(oldname, newname) })
}

func (g *guardFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := g.write("rename", newname, false, func() (err error) { f, err = g.inner.ReuseForWrite(oldname, newname, c); return err })
	return g.file(f, newname), err
}

func (g *guardFS) MkdirAll(dir string, perm os.FileMode) error {
	return g.write("mkdir", dir, false, func() error { return g.inner.MkdirAll(dir, perm) })
}

// Lock takes the directory lock through the inner FS and keeps it with
// the instance, so that the store can release it when it abandons a dead
// instance (whose Close would wait on parked goroutines).
func (g *guardFS) Lock(name string) (io.Closer, error) {
	c, err := g.inner.Lock(name)
	if err != nil {
		return nil, err
	}
	oc := &onceCloser{c: c}
	g.in.lock.Store(oc)
	return oc, nil
}

func (g *guardFS) List(dir string) ([]string, error)            { return g.inner.List(dir) }
func (g *guardFS) Stat(name string) (vfs.FileInfo, error)       { return g.inner.Stat(name) }
func (g *guardFS) PathBase(path string) string                  { return g.inner.PathBase(path) }
func (g *guardFS) PathJoin(elem ...string) string               { return g.inner.PathJoin(elem...) }
func (g *guardFS) PathDir(path string) string                   { return g.inner.PathDir(path) }
func (g *guardFS) GetDiskUsage(p string) (vfs.DiskUsage, error) { return g.inner.GetDiskUsage(p) }
func (g *guardFS) Unwrap() vfs.FS                               { return g.inner }

func (g *guardFS) file(f vfs.File, name string) vfs.File {
	if f == nil {
		return nil
	}
	return &guardFile{File: f, g: g, name: name}
}

// guardFile guards a file's writes like guardFS.
type guardFile struct {
	vfs.File
	g    *guardFS
	name string
}

func (f *guardFile) Write(p []byte) (n int, err error) {
	err = f.g.write("write", f.name, false, func() (err error) { n, err = f.File.Write(p); return err })
	return n, err
}

func (f *guardFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.g.write("write", f.name, false, func() (err error) { n, err = f.File.WriteAt(p, off); return err })
	return n, err
}

func (f *guardFile) Preallocate(off, length int64) error {
	return f.g.write("preallocate", f.name, false, func() error { return f.File.Preallocate(off, length) })
}

func (f *guardFile) Sync() error {
	return f.g.write("sync", f.name, true, f.File.Sync)
}

func (f *guardFile) SyncData() error {
	return f.g.write("sync", f.name, true, f.File.SyncData)
}

func (f *guardFile) SyncTo(length int64) (full bool, err error) {
	err = f.g.write("sync", f.name, true, func() (err error) { full, err = f.File.SyncTo(length); return err })
	return full, err
}

// onceCloser closes c once; later calls do nothing.
type onceCloser struct {
	once sync.Once
	c    io.Closer
	err  error
}

func (o *onceCloser) Close() error {
	o.once.Do(func() { o.err = o.c.Close() })
	return o.err
}
