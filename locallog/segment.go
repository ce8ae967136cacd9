package locallog

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// ownIndexInterval is the spacing, in bytes, of the sparse index a segment
// scan builds for itself.
const ownIndexInterval = 64 << 10

// hintSlots is how many read ends a segment remembers as exact start
// positions for the next read.
const hintSlots = 16

// segment is one .log and what locallog learned about it. The file is
// opened on first use and stays open (a deleted file stays readable
// through it) until the last listing holding the segment is released.
type segment struct {
	dir  string
	path string
	base int64
	// crcTail: CRC failures end the active segment's served part (no
	// Options.HighWatermark); otherwise only its structure does, and Read
	// reports a bad CRC below the high watermark as corruption.
	crcTail bool
	refs    atomic.Int32

	mu     sync.Mutex
	f      *os.File
	closed bool
	cur    cursor
	// fileIdx and fileTidx are the parsed .index and .timeindex (nil when
	// absent or unusable), loaded once for a rolled segment not scanned
	// yet and dropped when its scan is done.
	fileIdx     []index.OffsetEntry
	fileIdxSet  bool
	fileTidx    []index.TimeEntry
	fileTidxSet bool
	txnCache    txnFile
	hints       [hintSlots]hint
	hintNext    int
}

// hint says: every batch before byte pos ends below offset next.
type hint struct{ next, pos int64 }

// ownEntry is one entry of the sparse index a scan builds: the batch at
// pos ends at offset last, and every batch before pos has a max timestamp
// of at most tsBefore.
type ownEntry struct{ last, pos, tsBefore int64 }

// cursor is how far a segment has been scanned, batch header by batch
// header, and what the scan found. It only moves forward (unless the file
// shrinks under it), so every byte is scanned once.
type cursor struct {
	started  bool
	pos      int64 // byte position after the last consumed entry
	next     int64 // offset after the last consumed entry; base before any
	chk      *batch.Checker
	idx      []ownEntry
	idxPos   int64 // position of the last own index entry
	maxTs    int64 // largest batch max timestamp seen; -1 when none
	maxTsPos int64 // position of the first entry with maxTs
	txns     map[int64]*txnState
	// peekPos and peekLast remember the entry at pos that stopped the
	// scan at its bound (last offset peekLast), so that the next call
	// with a bound not past it reads nothing; peekPos is -1 when none.
	peekPos  int64
	peekLast int64
	done     bool  // a rolled segment scanned to its end
	size     int64 // the file's size when done
	err      error // a rolled segment's corruption, where the scan stopped
}

func newSegment(dir string, base int64, crcTail bool) *segment {
	return &segment{dir: dir, base: base, path: segPath(dir, base, kafkalog.LogSuffix), crcTail: crcTail}
}

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
}

// sameFile reports whether the segment's open file is still the file its
// name points to (false after a log cleaner replaced it). An unopened
// segment is always the same.
func (s *segment) sameFile() bool {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return true
	}
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(s.path)
	return err == nil && os.SameFile(a, b)
}

// fileLocked opens the .log on first use. A missing file is errVanished.
func (s *segment) fileLocked() (*os.File, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, vanished(s.path, err)
		}
		s.f = f
	}
	return s.f, nil
}

// file returns the open .log and its current size.
func (s *segment) file() (*os.File, int64, error) {
	s.mu.Lock()
	f, err := s.fileLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("locallog: stat %s: %w", s.path, err)
	}
	return f, st.Size(), nil
}

// scanState is a cursor's position as advance left it.
type scanState struct {
	pos, next int64
	byBound   bool // stopped before an entry whose last offset reaches the bound
}

// advance scans entries from the cursor while their last offset is below
// bound. The active segment's scan stops without error at the first torn,
// zero or invalid entry (a write in progress or preallocated space; the
// next call looks again), its entries also CRC-checked when crcTail is
// set. A rolled segment's scan ends at the end of the file or at zero
// bytes reaching it; anything else is kept as the segment's corruption.
// Errors: I/O.
func (s *segment) advance(bound int64, active bool) (scanState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.fileLocked()
	if err != nil {
		return scanState{}, err
	}
	c := &s.cur
	if !c.started {
		s.resetLocked()
	}
	if !active && c.done {
		return scanState{pos: c.pos, next: c.next}, nil
	}
	if c.peekPos == c.pos && c.peekLast >= bound {
		return scanState{pos: c.pos, next: c.next, byBound: true}, nil
	}
	st, err := f.Stat()
	if err != nil {
		return scanState{}, fmt.Errorf("locallog: stat %s: %w", s.path, err)
	}
	size := st.Size()
	if size < c.pos {
		s.resetLocked() // truncated in place: start over
	}
	readAhead := hopRead
	if active && s.crcTail {
		readAhead = windowSize
	}
	w := getWalker(f, size, readAhead)
	defer w.put()
	for c.pos < size {
		b, err := w.header(c.pos)
		if err == nil && b.LastOffset >= bound {
			c.peekPos, c.peekLast = c.pos, b.LastOffset
			return scanState{pos: c.pos, next: c.next, byBound: true}, nil
		}
		if err == nil {
			err = c.chk.Check(b)
		}
		if err == nil && active && s.crcTail {
			var ok bool
			if ok, err = w.crcValid(b); err == nil && !ok {
				err = kafkalog.Corruptf(b.Position, "CRC mismatch")
			}
		}
		if err != nil {
			if !isCorrupt(err) {
				return scanState{}, fmt.Errorf("locallog: scan %s: %w", s.path, err)
			}
			if !active {
				s.endRolledLocked(f, size, err)
			}
			break
		}
		s.consumeLocked(b)
	}
	if !active && c.pos >= size {
		c.done, c.size = true, size
	}
	if c.done {
		s.fileIdx, s.fileTidx = nil, nil // the own index replaces them
	}
	return scanState{pos: c.pos, next: c.next}, nil
}

// endRolledLocked records why a rolled segment's scan stopped: zero bytes
// up to the end are preallocated space, anything else is corruption.
func (s *segment) endRolledLocked(f *os.File, size int64, err error) {
	c := &s.cur
	c.done, c.size = true, size
	if nz, zerr := batch.FirstNonZero(f, c.pos, size); zerr == nil && nz < 0 {
		return
	}
	c.err = kafkalog.WithFile(err, s.path)
}

func (s *segment) resetLocked() {
	s.cur = cursor{started: true, next: s.base, chk: batch.NewChecker(s.base, -1), maxTs: -1, maxTsPos: -1, peekPos: -1}
	s.hints = [hintSlots]hint{}
}

// consumeLocked moves the cursor past entry b and records what the scan
// keeps: the own index, the max timestamp, transaction state.
func (s *segment) consumeLocked(b batch.Batch) {
	c := &s.cur
	if b.Position > 0 && b.Position-c.idxPos >= ownIndexInterval {
		c.idx = append(c.idx, ownEntry{last: b.LastOffset, pos: b.Position, tsBefore: c.maxTs})
		c.idxPos = b.Position
	}
	if b.MaxTimestamp > c.maxTs {
		c.maxTs, c.maxTsPos = b.MaxTimestamp, b.Position
	}
	if b.Magic == 2 && b.Transactional && b.ProducerID >= 0 {
		c.trackTxn(b)
	}
	c.pos, c.next = b.End(), b.LastOffset+1
}

// trustedStartLocked returns a position from which a walk finds the first
// entry whose last offset is >= offset: every entry before it ends below
// offset. It comes from the read hints and the own index (both from
// entries locallog checked itself), or is 0.
func (s *segment) trustedStartLocked(offset int64) int64 {
	var pos int64
	for _, h := range s.hints {
		if h.next > 0 && h.next <= offset && h.pos > pos {
			pos = h.pos
		}
	}
	idx := s.cur.idx
	i := sort.Search(len(idx), func(i int) bool { return idx[i].last > offset })
	if i > 0 && idx[i-1].pos > pos {
		pos = idx[i-1].pos
	}
	return pos
}

// exactHintLocked returns the position where an earlier read ended when
// that read's next offset is offset, else -1.
func (s *segment) exactHintLocked(offset int64) int64 {
	for _, h := range s.hints {
		if h.next == offset && h.next > 0 {
			return h.pos
		}
	}
	return -1
}

func (s *segment) addHintLocked(next, pos int64) {
	s.hints[s.hintNext] = hint{next: next, pos: pos}
	s.hintNext = (s.hintNext + 1) % hintSlots
}

// fileIndexLocked returns the parsed .index of a rolled segment, nil when
// it is absent, empty or does not parse: it is only ever a starting point
// that a walk verifies.
func (s *segment) fileIndexLocked() []index.OffsetEntry {
	if !s.fileIdxSet {
		s.fileIdxSet = true
		if data, err := os.ReadFile(segPath(s.dir, s.base, kafkalog.IndexSuffix)); err == nil {
			if e, err := index.ParseOffsetIndex(data, s.base); err == nil {
				s.fileIdx = e
			}
		}
	}
	return s.fileIdx
}

// untrustedStartLocked returns the position the .index gives for offset,
// when it is past trusted and the segment was not scanned whole (whose own
// index is then complete), else -1.
func (s *segment) untrustedStartLocked(offset, trusted int64, active bool) int64 {
	if active || s.cur.done {
		return -1
	}
	if e, ok := index.LookupOffset(s.fileIndexLocked(), offset); ok && int64(e.Position) > trusted {
		return int64(e.Position)
	}
	return -1
}
