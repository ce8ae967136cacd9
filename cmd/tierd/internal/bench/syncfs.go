package bench

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

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
