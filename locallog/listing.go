package locallog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// racyWindow: a listing taken less than this after the directory's mtime
// may have missed a change made within the same mtime tick (file times come
// from a coarse clock), so the next call lists again.
const racyWindow = 100 * time.Millisecond

// listing is one immutable view of the directory: its live segments in base
// offset order, the last one active. Readers hold a reference while they
// use it; the last reference closes the segment files no newer listing
// kept.
type listing struct {
	segs []*segment
	// swaps are base offsets of ".log.swap" files: a log cleaner swap in
	// progress, whose offsets no live segment may hold for a moment.
	swaps []int64
	// names are the directory's .log file names, live or not, as listed;
	// mtime and racy are about the directory, and change (under
	// Partition.mu) when a new listing finds the same names.
	names []string
	mtime time.Time
	racy  bool
	refs  atomic.Int32
}

// start returns the local log start offset: the oldest segment's base.
func (l *listing) start() int64 {
	if len(l.segs) == 0 {
		return 0
	}
	return l.segs[0].base
}

// nextBase returns the base offset of the segment after segs[i], or -1 for
// the last segment.
func (l *listing) nextBase(i int) int64 {
	if i+1 < len(l.segs) {
		return l.segs[i+1].base
	}
	return -1
}

// find returns the index of the segment with the largest base <= offset,
// 0 when offset is below every base.
func (l *listing) find(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// swapBetween reports whether a cleaner swap is in progress for a base in
// (lo, hi] (hi < 0: unbounded).
func (l *listing) swapBetween(lo, hi int64) bool {
	for _, b := range l.swaps {
		if b > lo && (hi < 0 || b <= hi) {
			return true
		}
	}
	return false
}

// sameFiles reports whether every segment's open .log is still the file
// at its path.
func (l *listing) sameFiles() bool {
	for _, s := range l.segs {
		if !s.sameFile() {
			return false
		}
	}
	return true
}

func (l *listing) release() {
	if l.refs.Add(-1) == 0 {
		for _, s := range l.segs {
			s.release()
		}
	}
}

// acquire returns the current listing with a reference the caller
// releases, listing the directory again first when its mtime changed, the
// last listing was racy, or force is set.
func (p *Partition) acquire(force bool) (*listing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if force || p.cur.racy {
		if err := p.relistLocked(); err != nil {
			return nil, err
		}
	} else {
		st, err := os.Stat(p.dir)
		if err != nil {
			return nil, fmt.Errorf("locallog: stat %s: %w", p.dir, err)
		}
		if !st.ModTime().Equal(p.cur.mtime) {
			if err := p.relistLocked(); err != nil {
				return nil, err
			}
		}
	}
	p.cur.refs.Add(1)
	return p.cur, nil
}

// relistLocked reads the directory and replaces p.cur. Segments already
// known keep their state unless their .log was replaced by another file
// (a log cleaner swap). Names per internal/kafkalog: live ".log" files
// only; ".deleted", ".cleaned", ".swap" and any other name are not
// segments.
func (p *Partition) relistLocked() error {
	now := time.Now()
	st, err := os.Stat(p.dir)
	if err != nil {
		return fmt.Errorf("locallog: stat %s: %w", p.dir, err)
	}
	d, err := kafkalog.ListSegmentDir(p.dir)
	if err != nil {
		return fmt.Errorf("locallog: list %s: %w", p.dir, err)
	}
	mtime, racy := st.ModTime(), now.Sub(st.ModTime()) < racyWindow
	var names []string // the .log files, live or not
	for _, f := range d.Segments {
		names = append(names, f.Name)
	}
	for _, f := range d.NotLive {
		names = append(names, f.Name)
	}
	if p.cur != nil && slices.Equal(names, p.cur.names) && p.cur.sameFiles() {
		// Only other files changed (indexes, snapshots, checkpoints). The
		// same names may also be new files: a directory deleted and
		// created again, or a cleaner swap no listing saw in progress;
		// those are listed afresh below.
		p.cur.mtime, p.cur.racy = mtime, racy
		return nil
	}
	nl := &listing{mtime: mtime, racy: racy, names: names}
	nl.refs.Store(1)
	old := map[int64]*segment{}
	if p.cur != nil {
		for _, s := range p.cur.segs {
			old[s.base] = s
		}
	}
	for _, f := range d.NotLive {
		if f.Pending == kafkalog.SwapSuffix {
			nl.swaps = append(nl.swaps, f.BaseOffset)
		}
	}
	for _, f := range d.Segments {
		s := old[f.BaseOffset]
		if s == nil || !s.sameFile() {
			s = newSegment(p.dir, f.BaseOffset, p.opts.HighWatermark == nil)
		}
		s.refs.Add(1)
		nl.segs = append(nl.segs, s)
	}
	sort.Slice(nl.swaps, func(i, j int) bool { return nl.swaps[i] < nl.swaps[j] })
	if p.cur != nil {
		p.cur.release()
	}
	p.cur = nl
	return nil
}

// errVanished marks a segment file that disappeared between listing and
// reading: the caller lists again and retries.
var errVanished = errors.New("locallog: segment file vanished")

func vanished(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", errVanished, path)
	}
	return fmt.Errorf("locallog: open %s: %w", path, err)
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, kafkalog.FileName(base, suffix))
}
