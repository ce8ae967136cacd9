package kafkalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// LogFile is one ".log" file of a partition directory, as listed.
type LogFile struct {
	SegmentFile
	// Name is the file name, e.g. "00000000000000000206.log.swap".
	Name string
	// Info is the file as listed (size, mtime, identity): a caller that
	// acts on the file later can check it is still the same file.
	Info fs.FileInfo
}

// Path returns the file's path under dir.
func (f LogFile) Path(dir string) string { return filepath.Join(dir, f.Name) }

// SegmentDir is one listing of a partition directory by Kafka's file
// names (FileName, ParseFileName): the segments it holds and the files a
// broker is in the middle of deleting or swapping in.
type SegmentDir struct {
	// Segments are the live ".log" files, by base offset ascending: the
	// last one is the active segment.
	Segments []LogFile
	// NotLive are the ".log" files with a ".deleted", ".cleaned" or
	// ".swap" suffix (log deletion or the log cleaner at work), by name.
	NotLive []LogFile
	// Deleted reports whether any file of the directory, of any kind,
	// carries the ".deleted" suffix (an asynchronous delete not yet done).
	Deleted bool
}

// ErrNotSegmentFile: a live ".log" name in a partition directory that is
// not a regular file (a directory, a device, a dangling symlink or one to a
// directory). Such an entry would shift which segment is the active one
// and where each rolled segment ends, so the directory is refused rather
// than listed around it.
var ErrNotSegmentFile = errors.New("kafkalog: a segment name that is not a regular file")

// ListSegmentDir lists a partition directory once. A symlink to a regular
// file counts as that file (its size and identity are the target's). A
// file that vanishes between the listing and its stat is left out (a
// broker deleting under us). Errors: the directory's, from os.ReadDir;
// ErrNotSegmentFile (wrapped, naming the entry) for a live ".log" name
// that is not a regular file; any other stat error but fs.ErrNotExist.
func ListSegmentDir(dir string) (SegmentDir, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return SegmentDir{}, err
	}
	var d SegmentDir
	for _, e := range ents {
		f, ok := ParseFileName(e.Name())
		if !ok {
			continue
		}
		d.Deleted = d.Deleted || f.Pending == DeletedSuffix
		if f.Suffix != LogSuffix || (!f.Live && e.IsDir()) {
			continue
		}
		info, err := e.Info()
		if err == nil && info.Mode()&fs.ModeSymlink != 0 {
			info, err = os.Stat(filepath.Join(dir, e.Name()))
			if errors.Is(err, fs.ErrNotExist) {
				if _, lerr := os.Lstat(filepath.Join(dir, e.Name())); lerr == nil {
					err = fmt.Errorf("%w: %s is a symlink to nothing", ErrNotSegmentFile, filepath.Join(dir, e.Name()))
				}
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return SegmentDir{}, err
		}
		if f.Live && !info.Mode().IsRegular() {
			return SegmentDir{}, fmt.Errorf("%w: %s (%s)", ErrNotSegmentFile, filepath.Join(dir, e.Name()), info.Mode().Type())
		}
		lf := LogFile{SegmentFile: f, Name: e.Name(), Info: info}
		if f.Live {
			d.Segments = append(d.Segments, lf)
		} else {
			d.NotLive = append(d.NotLive, lf)
		}
	}
	sort.Slice(d.Segments, func(i, j int) bool { return d.Segments[i].BaseOffset < d.Segments[j].BaseOffset })
	return d, nil
}
