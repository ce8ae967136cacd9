package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Lock holds the lock files of a set of log dirs.
type Lock struct {
	files []*os.File
	dirs  []string // files[i] is in dirs[i]
}

// LockDirs takes, without waiting, an exclusive flock(2) on LockFile in
// each log dir (creating it), and keeps them until Close. flock locks
// belong to an open file description, so two LockDirs in one process
// conflict too. The lock files' records are left as they are until
// Record. Errors: ErrLocked (wrapped, naming the dir and the holder) when
// another process holds one; I/O errors. Nothing stays locked on error.
func LockDirs(dirs []string) (*Lock, error) {
	l := &Lock{}
	for _, d := range dirs {
		p := filepath.Join(d, LockFile)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("lock log dir %s: %w", d, err)
		}
		if err := flock(f); err != nil {
			f.Close()
			l.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s is locked (%s) by %s; stop that tierd first: two tierds on one log dir would both copy its partitions",
					ErrLocked, d, p, readHolder(p))
			}
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		l.files = append(l.files, f)
		l.dirs = append(l.dirs, d)
	}
	return l, nil
}

// Check returns nil while dir's LockFile is the file l holds, and
// otherwise why not: the log dir was renamed or removed, or another
// directory now stands at its path (an empty mount point where a disk was
// unmounted holds no lock file; one mounted again holds the same file).
// A dir l does not lock is an error too.
func (l *Lock) Check(dir string) error {
	for i, d := range l.dirs {
		if d != dir {
			continue
		}
		held, err := l.files[i].Stat()
		if err != nil {
			return fmt.Errorf("stat the held lock file of log dir %s: %w", dir, err)
		}
		p := filepath.Join(dir, LockFile)
		now, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w: the log dir is not the one this tierd locked at start (unmounted, renamed or replaced?)", err)
		}
		if !os.SameFile(held, now) {
			return fmt.Errorf("%s is not the file this tierd locked at start: the log dir was replaced (or another disk mounted there)", p)
		}
		return nil
	}
	return fmt.Errorf("log dir %s is not locked by this tierd", dir)
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Record writes this process as the holder (instance id, pid, host) into
// every lock file, fsynced.
func (l *Lock) Record(id string) error {
	host, _ := os.Hostname()
	data, err := json.Marshal(Holder{InstanceID: id, PID: os.Getpid(), Host: host})
	if err != nil {
		return err
	}
	data = append(data, '\n')
	for _, f := range l.files {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the locks. The files stay, with the last holder's record.
func (l *Lock) Close() error {
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.Close())
	}
	l.files, l.dirs = nil, nil
	return errors.Join(errs...)
}
