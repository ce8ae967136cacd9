package rsmapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

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
// no "." or ".." element, and name, both as given and with every symbolic
// link resolved, the segment's own file in c's partition directory
// directly inside one of logDirs (as configured, or resolved): else
// ErrPathNotAllowed, and nothing is opened. The file is opened without
// following a symbolic link in its last element, and must be a regular
// file. Errors: ErrPathNotAllowed; ErrInvalid for a file that does not
// exist (the broker removed it) or is not a regular file; open errors.
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
	configured := make([]string, 0, 2*len(logDirs))
	var resolvedDirs []string
	for _, d := range logDirs {
		configured = append(configured, filepath.Clean(d))
		if r, err := filepath.EvalSymlinks(d); err == nil {
			configured = append(configured, r)
			resolvedDirs = append(resolvedDirs, r)
		}
	}
	if err := checkPlace(clean, configured, c, k); err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(clean)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s %s does not exist (removed by the broker?)", ErrInvalid, k, p)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s %s: %w", k, p, err)
	}
	if err := checkPlace(real, resolvedDirs, c, k); err != nil {
		return nil, fmt.Errorf("%w (%s resolves to %s)", err, p, real)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s %s does not exist (removed by the broker?)", ErrInvalid, k, p)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s %s: %w", k, p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s %s: %w", k, p, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s %s is not a regular file", ErrInvalid, k, p)
	}
	return f, nil
}
