package rlmm

import (
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// faultFS is a filesystem whose writes run out of space, turn read-only
// or hang on demand, as a full, remounted or dead disk does.
type faultFS struct {
	vfs.FS
	// free is the bytes writes may still add; -1 (newFaultFS's) is
	// unlimited. A write beyond it writes what fits and fails with ENOSPC.
	free     atomic.Int64
	readOnly atomic.Bool
	// stall, when set, blocks writes of files other than the store's
	// probe until it is closed.
	stall atomic.Pointer[chan struct{}]
	// walFull fails the writes of Pebble's WAL files (*.log) with ENOSPC
	// while other writes, the probe's among them, succeed: a disk with
	// room for the probe but not for the WAL's preallocation.
	walFull atomic.Bool
}

func newFaultFS(inner vfs.FS) *faultFS {
	f := &faultFS{FS: inner}
	f.free.Store(-1)
	return f
}

func (f *faultFS) check(name string) error {
	if f.readOnly.Load() {
		return &os.PathError{Op: "open", Path: name, Err: syscall.EROFS}
	}
	return nil
}

func (f *faultFS) checkWrite(name string) error {
	if err := f.check(name); err != nil {
		return err
	}
	if f.walFull.Load() && strings.HasSuffix(name, ".log") {
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

// take reserves up to n bytes and returns how many it got.
func (f *faultFS) take(n int) int {
	for {
		free := f.free.Load()
		if free < 0 {
			return n
		}
		got := min(int64(n), free)
		if f.free.CompareAndSwap(free, free-got) {
			return int(got)
		}
	}
}

func (f *faultFS) wait(name string) {
	if ch := f.stall.Load(); ch != nil && !strings.Contains(name, ".tierd-write-probe") {
		<-*ch
	}
}

func (f *faultFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.check(name); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name, c)
	return f.wrap(file, name), err
}

func (f *faultFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := f.check(name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(file, name), err
}

func (f *faultFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.check(newname); err != nil {
		return nil, err
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(file, newname), err
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.check(newname); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	if err := f.check(name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *faultFS) Link(oldname, newname string) error {
	if err := f.check(newname); err != nil {
		return err
	}
	return f.FS.Link(oldname, newname)
}

// GetDiskUsage reports the budget as the free space (1 TiB when
// unlimited).
func (f *faultFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	free := f.free.Load()
	if free < 0 {
		free = 1 << 40
	}
	return vfs.DiskUsage{AvailBytes: uint64(free), TotalBytes: 1 << 41}, nil
}

func (f *faultFS) wrap(file vfs.File, name string) vfs.File {
	if file == nil {
		return nil
	}
	return &faultFile{File: file, fs: f, name: name}
}

type faultFile struct {
	vfs.File
	fs   *faultFS
	name string
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.wait(f.name)
	if err := f.fs.checkWrite(f.name); err != nil {
		return 0, err
	}
	n := f.fs.take(len(p))
	w, err := f.File.Write(p[:n])
	if err == nil && n < len(p) {
		err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return w, err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.wait(f.name)
	if err := f.fs.checkWrite(f.name); err != nil {
		return 0, err
	}
	n := f.fs.take(len(p))
	w, err := f.File.WriteAt(p[:n], off)
	if err == nil && n < len(p) {
		err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return w, err
}
