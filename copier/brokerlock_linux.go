//go:build linux

package copier

import (
	"errors"
	"os"
	"syscall"
)

// fOFDGetLk is Linux's F_OFD_GETLK (include/uapi/asm-generic/fcntl.h),
// which package syscall does not name.
const fOFDGetLk = 36

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

func fcntlLock(f *os.File, cmd int, lk *syscall.Flock_t) error {
	for {
		err := syscall.FcntlFlock(f.Fd(), cmd, lk)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
