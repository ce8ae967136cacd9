//go:build !linux

package copier

import (
	"errors"
	"os"
	"syscall"
)

// getLock asks which POSIX lock of another process, if any, conflicts
// with a whole-file write lock on f (F_GETLK: a lock of this process
// does not show).
func getLock(f *os.File) (syscall.Flock_t, error) {
	lk := wholeFileWriteLock()
	for {
		err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk)
		if !errors.Is(err, syscall.EINTR) {
			return lk, err
		}
	}
}

// setSharedLock takes, without waiting, a POSIX read lock on the whole
// of f (open for reading). Errors: EAGAIN or EACCES when another lock
// conflicts.
func setSharedLock(f *os.File) error {
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	for {
		err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
