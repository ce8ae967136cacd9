package rsmapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tierd/tierd/internal/kafkalog"
)

// fileKind is which of a segment's files a path names.
type fileKind int

const (
	kindLog fileKind = iota
	kindOffsetIndex
	kindTimeIndex
	kindTxnIndex
	kindSnapshot
)

func (k fileKind) String() string {
	return [...]string{"logSegment", "offsetIndex", "timeIndex", "transactionIndex", "producerSnapshot"}[k]
}

// suffix is the file name suffix of the kind.
func (k fileKind) suffix() string {
	return [...]string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix, kafkalog.SnapshotSuffix}[k]
}

// nameOK reports whether base is the file name a file of this kind of
// the segment at start must have: <20-digit start><suffix>, or for the
// producer snapshot <20-digit offset>.snapshot of any offset.
func (k fileKind) nameOK(base string, start int64) bool {
	if k != kindSnapshot {
		return base == kafkalog.FileName(start, k.suffix())
	}
	f, ok := kafkalog.ParseFileName(base)
	return ok && f.Live && f.Suffix == kafkalog.SnapshotSuffix && base == kafkalog.FileName(f.BaseOffset, kafkalog.SnapshotSuffix)
}

// checkPlace reports whether p (clean, absolute) is the segment's own file
// of kind k in the partition directory of c inside one of dirs (clean):
// <dir>/<topic>-<partition>/<name>.
func checkPlace(p string, dirs []string, c copyName, k fileKind) error {
	part := filepath.Dir(p)
	if filepath.Base(part) != c.tp.String() {
		return fmt.Errorf("%w: %s %s is not in a partition directory of %s (<log dir>/%s/)", ErrPathNotAllowed, k, p, c.tp, c.tp)
	}
	if !slices.Contains(dirs, filepath.Dir(part)) {
		return fmt.Errorf("%w: %s %s is not inside rsm.log_dirs (%s)", ErrPathNotAllowed, k, p, strings.Join(dirs, ", "))
	}
	if !k.nameOK(filepath.Base(p), c.start) {
		want := kafkalog.FileName(c.start, k.suffix())
		if k == kindSnapshot {
			want = "<20-digit offset>" + kafkalog.SnapshotSuffix
		}
		return fmt.Errorf("%w: %s %s is not the file of the segment at offset %d (want %s)", ErrPathNotAllowed, k, p, c.start, want)
	}
	return nil
}

// openBrokerFile checks a path the broker gave for a file of kind k of
// the copy c and opens it for reading. The path must be absolute, hold
// no "." or ".." element, and name the segment's own file in c's
// partition directory directly inside one of logDirs (as configured, or
// with their symbolic links resolved): else ErrPathNotAllowed, and
// nothing is opened. The file is then opened from the log dir down, one
// element at a time, following no symbolic link below the log dir (the
// partition directory and the file must be what they are named, not
// links), so that nothing swapped in after the checks is read, and
// without waiting on a FIFO; it must be a regular file, and not a hard
// link to a file of another owner than its directory's. Errors:
// ErrPathNotAllowed (a link below the log dir among them); ErrInvalid for
// a file that does not exist (the broker removed it) or is not a regular
// file; open errors.
func openBrokerFile(p string, logDirs []string, c copyName, k fileKind) (*os.File, error) {
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("%w: %s %q is not an absolute path", ErrPathNotAllowed, k, p)
	}
	for _, el := range strings.Split(p, string(filepath.Separator)) {
		if el == "." || el == ".." {
			return nil, fmt.Errorf("%w: %s %s holds a %q element", ErrPathNotAllowed, k, p, el)
		}
	}
	clean := filepath.Clean(p)
	var configured []string
	byName := map[string]string{} // a spelling of a log dir -> the path it is opened by
	for _, d := range logDirs {
		cd := filepath.Clean(d)
		configured = append(configured, cd)
		byName[cd] = cd
		if r, err := filepath.EvalSymlinks(d); err == nil && r != cd {
			configured = append(configured, r)
			byName[r] = r
		}
	}
	if err := checkPlace(clean, configured, c, k); err != nil {
		return nil, err
	}
	if afterPathCheck != nil {
		afterPathCheck(p)
	}
	return openBelow(byName[filepath.Dir(filepath.Dir(clean))], c.tp.String(), filepath.Base(clean), p, k)
}

// openBelow opens <dir>/<part>/<name> for reading: dir as the operator
// configured it (its own links followed), then part and name each with
// O_NOFOLLOW relative to the directory before, so that a link swapped in
// below dir at any moment is refused instead of followed; name with
// O_NONBLOCK, so that a FIFO does not wait for a writer. p and k name the
// file in errors.
func openBelow(dir, part, name, p string, k fileKind) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, openError(p, k, err)
	}
	defer unix.Close(dfd)
	pfd, err := unix.Openat(dfd, part, flags|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) && isLink(dfd, part) {
		err = unix.ELOOP // Linux says ENOTDIR for a link under O_DIRECTORY|O_NOFOLLOW
	}
	if err != nil {
		return nil, openError(p, k, err)
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, flags|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(p, k, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s %s: %w", k, p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s %s is not a regular file", ErrInvalid, k, p)
	}
	if err := checkLinks(pfd, &st, p, k); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s %s: %w", k, p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// checkLinks refuses a file with more than one hard link whose owner is
// not its partition directory's (pfd): a link the broker's user made to
// a file it does not own (where fs.protected_hardlinks is off), which
// tierd, perhaps root, would otherwise read for it. Kafka's own files are
// its user's and have one link.
func checkLinks(pfd int, st *unix.Stat_t, p string, k fileKind) error {
	if st.Nlink <= 1 {
		return nil
	}
	var dir unix.Stat_t
	if err := unix.Fstat(pfd, &dir); err != nil {
		return fmt.Errorf("stat the partition directory of %s %s: %w", k, p, err)
	}
	if st.Uid != dir.Uid {
		return fmt.Errorf("%w: %s %s has %d hard links and another owner (uid %d) than its partition directory (uid %d)",
			ErrPathNotAllowed, k, p, st.Nlink, st.Uid, dir.Uid)
	}
	return nil
}

// isLink reports whether name in the directory dfd is a symbolic link.
func isLink(dfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// openError says why an element of a broker file's path did not open: a
// symbolic link (ELOOP under O_NOFOLLOW) is not allowed, a missing one
// was removed.
func openError(p string, k fileKind, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %s %s: its partition directory or the file is a symbolic link (none is followed below rsm.log_dirs)",
			ErrPathNotAllowed, k, p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s %s does not exist (removed by the broker?)", ErrInvalid, k, p)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %s %s: its partition directory is not a directory", ErrInvalid, k, p)
	}
	return fmt.Errorf("open %s %s: %w", k, p, err)
}

// afterPathCheck, when set (by tests), runs after a path's checks and
// before its file is opened.
var afterPathCheck func(path string)
