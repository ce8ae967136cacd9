package copier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// .tierd.lock, and excludeBroker's an open file description lock, which
// that close keeps). POSIX locks never conflict with their own process's, so
// F_GETLK alone would miss a lock this process held; the open file
// description form (F_OFD_GETLK, Linux 3.15) conflicts with every other
// lock, the process's own included, and is tried first.
//
// Errors: I/O errors opening or checking the file (permission denied
// among them), errNotRegular for a .lock that is not a regular file (a
// FIFO among them, which is not waited on): whether a broker runs cannot
// be told.
func lockHolder(path string) (held bool, pid int, err error) {
	f, err := openLockFile(path, os.O_RDONLY)
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

// errNotRegular: a log dir's .lock is not a regular file (a FIFO, a
// device, a directory, or a symlink to one): no broker's lock file, and
// whether a broker runs cannot be told from it.
var errNotRegular = errors.New("not a regular file")

// openLockFile opens the file at path (following a symlink, as the
// broker's FileChannel.open does) with flag, without waiting: O_NONBLOCK,
// so that a FIFO does not keep the open waiting for a writer. Errors:
// the open's (fs.ErrNotExist for a missing file); a *os.PathError
// wrapping errNotRegular when the file is not a regular file.
func openLockFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", errNotRegular, st.Mode().Type())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// wholeFileWriteLock is the lock lockHolder asks about: write, from byte
// 0 to the end of the file (and beyond), as FileChannel.tryLock() takes.
func wholeFileWriteLock() syscall.Flock_t {
	return syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
}

// errBrokerHolds: another process holds a lock on the log dir's .lock
// (see excludeBroker).
var errBrokerHolds = errors.New("copier: a process holds the log dir's lock")

// brokerExclusion is a shared lock tierd holds on a log dir's .lock
// while it renames or removes files there (see excludeBroker).
type brokerExclusion struct {
	f       *os.File
	path    string // the .lock (f may have been opened under another name: createMarked)
	created bool   // tierd created the file: it removes it again
}

// excludeBroker takes, without waiting, a shared (read) lock on the
// whole file at path, the log dir's .lock, creating the file when it is
// missing: a broker starting while tierd holds it is refused the
// exclusive lock FileChannel.tryLock asks for (Kafka's LogManager then
// stops with "Failed to acquire lock on file .lock"), so that no broker
// starts between tierd's look at the lock and its renames. It is an open
// file description lock (F_OFD_SETLK; else a POSIX one, F_SETLK) on a
// descriptor opened read-only, so it needs no write permission on the
// file. Release it with release.
//
// Errors: errBrokerHolds when a process holds a conflicting lock on the
// file (a running broker), holder its pid as lockHolder gives it; I/O
// errors (the file cannot be opened or created, a dangling symlink among
// them, it is not a regular file (errNotRegular), or the lock cannot be
// asked for): whether a broker runs cannot be told. The lock is taken
// only once path still names the file locked (see lockOpened), and the
// marker written only then.
func excludeBroker(path string) (e *brokerExclusion, holder int, err error) {
	for try := 0; ; try++ {
		f, created, err := openBrokerLock(path)
		if errors.Is(err, fs.ErrExist) && try < 3 {
			continue // created meanwhile (a broker starting): lock that one
		}
		if err != nil {
			return nil, -1, err
		}
		e, holder, err := lockOpened(f, path, created)
		if errors.Is(err, errLockReplaced) && try < 3 {
			continue // deleted or replaced meanwhile: lock what path names now
		}
		return e, holder, err
	}
}

// errLockReplaced: the .lock excludeBroker locked is no longer the file
// its path names (a broker that stopped deleted it, and one starting may
// have created and locked another).
var errLockReplaced = errors.New("copier: the log dir's .lock was replaced while it was locked")

// openBrokerLock opens the .lock at path for excludeBroker, read-only, or
// creates it (read-write, O_EXCL, empty) when it is missing; created says
// which. Errors: fs.ErrExist when the file was created by another process
// between the two opens; openLockFile's.
func openBrokerLock(path string) (f *os.File, created bool, err error) {
	f, err = openLockFile(path, os.O_RDONLY)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, false, err
	}
	if f, err = createMarked(path); err == nil || errors.Is(err, fs.ErrExist) {
		return f, err == nil, err
	}
	// The marked file could not be made (a full disk, a file size limit):
	// an empty one, which counts as Kafka's, the side that deletes
	// nothing of another's.
	f, err = openLockFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	return f, err == nil, err
}

// lockTempPrefix names the files createMarked makes beside .lock: tierd's
// own, removed by the next createMarked when a kill left one.
const lockTempPrefix = ".lock.tierd-"

// createMarked makes the .lock at path whole, with tierdLockMarker in it
// from the moment it exists: written to a file of its own first, then
// linked into place (link fails, fs.ErrExist, when a .lock exists by
// then, as O_EXCL would), so that no kill can leave an empty .lock of
// tierd's making, which would count as Kafka's. It returns the file
// opened for reading and writing.
func createMarked(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if stale, _ := filepath.Glob(filepath.Join(dir, lockTempPrefix+"*")); len(stale) > 0 {
		for _, p := range stale {
			os.Remove(p) // left by a kill between the write and the link below
		}
	}
	tmp := filepath.Join(dir, fmt.Sprintf("%s%d", lockTempPrefix, os.Getpid()))
	t, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = t.WriteString(tierdLockMarker)
	if err == nil {
		err = os.Link(tmp, path)
	}
	os.Remove(tmp)
	if err != nil {
		t.Close()
		return nil, err
	}
	// t is the file now at path, unless a process replaced it between the
	// link and here; lockOpened checks that path still names it.
	return t, nil
}

// lockOpened takes excludeBroker's shared lock on f, the .lock opened at
// path (created: by openBrokerLock), and checks that path still names f
// once the lock is granted: a lock on a file no longer at path keeps no
// broker out. Only then is a file tierd created marked as tierd's (a
// broker that locked it first keeps it as it was, empty). A write of the
// marker that fails (a full disk, when local retention matters most)
// leaves the file empty, which a kill would leave counted as Kafka's, the
// side that deletes nothing. f is closed unless the lock is returned.
//
// Errors: errBrokerHolds, holder the pid (see excludeBroker);
// errLockReplaced; the lock's or the stats' I/O errors.
func lockOpened(f *os.File, path string, created bool) (e *brokerExclusion, holder int, err error) {
	if err := setSharedLock(f); err != nil {
		holder = -1
		if lk, gerr := getLock(f); gerr == nil && lk.Type != syscall.F_UNLCK {
			holder = int(lk.Pid)
		}
		f.Close() // a file tierd just created and a broker locked is the broker's now
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, holder, errBrokerHolds
		}
		return nil, -1, &os.PathError{Op: "fcntl F_SETLK", Path: path, Err: err}
	}
	held, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, -1, err
	}
	now, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(held, now) {
		f.Close()
		return nil, -1, errLockReplaced
	}
	if err != nil {
		f.Close()
		return nil, -1, err
	}
	if !created {
		// A .lock a killed tierd left (marked as its own, and no
		// broker has locked it since: tierd's lock was granted) is
		// removed on release like one made now.
		created = hasTierdMarker(f, path)
	}
	return &brokerExclusion{f: f, path: path, created: created}, -1, nil
}

// tierdLockMarker is what a .lock that tierd creates holds (Kafka's
// FileLock creates an empty file and never writes to it).
const tierdLockMarker = "tierd: not a Kafka broker's lock; tierd removes it\n"

// isTierdLock reports whether the file at path is a regular file that
// begins with tierdLockMarker: a .lock that tierd created (excludeBroker)
// and could not remove, having been killed while it held it. Such a
// file says nothing about Kafka. A file that cannot be read, or is not
// a regular file, is not tierd's.
func isTierdLock(path string) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := openLockFile(path, os.O_RDONLY)
	if err != nil {
		return false
	}
	defer f.Close()
	return hasTierdMarker(f, path)
}

// hasTierdMarker reports whether f, the regular file at path (not a
// symlink), begins with tierdLockMarker.
func hasTierdMarker(f *os.File, path string) bool {
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return false
	}
	buf := make([]byte, len(tierdLockMarker))
	if _, err := f.ReadAt(buf, 0); err != nil {
		return false
	}
	return string(buf) == tierdLockMarker
}

// release drops the lock. A .lock tierd created is removed first, while
// the lock still keeps a broker from it (a broker starting after that
// creates its own), so that tierd leaves no .lock behind: with
// broker_owned unset, one would make the dir a Kafka log dir.
func (e *brokerExclusion) release() error {
	var err error
	if e.created {
		held, serr := e.f.Stat()
		now, nerr := os.Lstat(e.path)
		if serr == nil && nerr == nil && os.SameFile(held, now) {
			err = os.Remove(e.path)
		}
	}
	return errors.Join(err, e.f.Close())
}
