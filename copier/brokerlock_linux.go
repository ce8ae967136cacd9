//go:build linux

package copier

import (
	"errors"
	"os"
	"syscall"
)

// fOFDGetLk and fOFDSetLk are Linux's F_OFD_GETLK and F_OFD_SETLK
// (include/uapi/asm-generic/fcntl.h), which package syscall does not
// name.
const (
	fOFDGetLk = 36
	fOFDSetLk = 37
)

// getLock asks which lock, if any, conflicts with a whole-file write
// lock on f: with F_OFD_GETLK, and with F_GETLK on a kernel without it
// (EINVAL).
func getLock(f *os.File) (syscall.Flock_t, error) {
	lk := wholeFileWriteLock()
	err := fcntlLock(f, fOFDGetLk, &lk)
	if errors.Is(err, syscall.EINVAL) {
		lk = wholeFileWriteLock()
		err = fcntlLock(f, syscall.F_GETLK, &lk)
	}
	return lk, err
}

// setSharedLock takes, without waiting, a read lock on the whole of f
// (open for reading): with F_OFD_SETLK, so that closing another
// descriptor of the file in this process (lockHolder's) keeps it, and
// with F_SETLK on a kernel without it (EINVAL). Errors: EAGAIN or EACCES
// when another lock conflicts.
func setSharedLock(f *os.File) error {
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	err := fcntlLock(f, fOFDSetLk, &lk)
	if errors.Is(err, syscall.EINVAL) {
		lk = syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: 0, Len: 0}
		err = fcntlLock(f, syscall.F_SETLK, &lk)
	}
	return err
}

func fcntlLock(f *os.File, cmd int, lk *syscall.Flock_t) error {
	for {
		err := syscall.FcntlFlock(f.Fd(), cmd, lk)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
