package copier

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockHolder reports whether another process holds a lock on the file at
// path that a whole-file write lock would conflict with: what a Kafka
// broker holds on <log.dir>/.lock for as long as it runs (its
// LogManager locks each log dir with FileChannel.tryLock, which on Linux
// is an fcntl(2) record lock from offset 0 to the end, a POSIX "process"
// lock, not flock(2)). pid is the holder's pid as this process sees it:
// 0 for a holder in another pid namespace (a broker in another
// container), -1 for an open file description lock, which names no
// process. A missing file is held by nobody (Kafka deletes .lock when it
// shuts down cleanly; an unlocked one is left by a broker that stopped).
//
// The file is opened read-only, never created, and closed at once; the
// check sets no lock. Closing it would drop POSIX locks this process held
// on the file, and tierd holds none there (its own lock is flock(2) on
// .tierd.lock). POSIX locks never conflict with their own process's, so
// F_GETLK alone would miss a lock this process held; the open file
// description form (F_OFD_GETLK, Linux 3.15) conflicts with every other
// lock, the process's own included, and is tried first.
//
// Errors: I/O errors opening or checking the file (permission denied
// among them): whether a broker runs cannot be told.
func lockHolder(path string) (held bool, pid int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, -1, nil
	}
	if err != nil {
		return false, -1, err
	}
	defer f.Close()
	lk, err := getLock(f)
	if err != nil {
		return false, -1, &os.PathError{Op: "fcntl F_GETLK", Path: path, Err: err}
	}
	if lk.Type == syscall.F_UNLCK {
		return false, -1, nil
	}
	return true, int(lk.Pid), nil
}

// wholeFileWriteLock is the lock lockHolder asks about: write, from byte
// 0 to the end of the file (and beyond), as FileChannel.tryLock() takes.
func wholeFileWriteLock() syscall.Flock_t {
	return syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
}
