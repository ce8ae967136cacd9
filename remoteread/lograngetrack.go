package remoteread

import (
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// rangeTracker remembers where recent WriteLogRange reads of each copy
// ended, and the read-ahead state of the reader chain that made each, so
// that a read starting at such an end, or a little before it, is known
// to continue that chain: a broker reading a copy asks for bounded
// windows that go on exactly where the last ended, and opens its next
// stream at an offset index entry, which lies before where its previous
// stream stopped (index entries are sparse). A read that continues a
// chain takes the chain's end out and leaves its own in its place.
//
// As seqTracker's, ends of reads that continued nothing go into a ring
// of their own (freshSize), so that random readers neither push
// sequential readers' ends out nor leave so many about that random
// reads often land near one; each ring forgets its oldest ends first.
type rangeTracker struct {
	mu         sync.Mutex
	ends       map[remotelog.SegmentID][]rangeEnd // per copy, in no order
	fresh, seq rangeRing
	gen        uint64
}

// rangeEnd is one remembered end: the position, its chain, and the
// generation that names the entry in its ring.
type rangeEnd struct {
	pos int64
	st  *readAhead
	gen uint64
}

// rangeRing is a ring of remembered ends (copy and generation), oldest
// overwritten first.
type rangeRing struct {
	id   []remotelog.SegmentID
	gen  []uint64
	next int
	size int
}

func newRangeTracker() *rangeTracker {
	t := &rangeTracker{}
	t.clear()
	return t
}

func (t *rangeTracker) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ends = map[remotelog.SegmentID][]rangeEnd{}
	t.fresh = rangeRing{size: freshSize}
	t.seq = rangeRing{size: seqTrackerSize}
}

// take returns the chain of the read of copy id that ended at or at most
// tol bytes after start (the nearest such end), and that end, and
// forgets it; nil when a read starting at start continues none.
func (t *rangeTracker) take(id remotelog.SegmentID, start, tol int64) (*readAhead, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ends := t.ends[id]
	best := -1
	for i, e := range ends {
		if e.pos >= start && e.pos-start <= tol && (best < 0 || e.pos < ends[best].pos) {
			best = i
		}
	}
	if best < 0 {
		return nil, 0
	}
	e := ends[best]
	t.drop(id, e.gen)
	return e.st, e.pos
}

// ended records that a read of copy id by chain st, which has continued
// hops times, ended at pos: in the sequential ring when it continued a
// chain (hops > 0), else in the fresh one.
func (t *rangeTracker) ended(id remotelog.SegmentID, pos int64, st *readAhead, hops int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	r := &t.fresh
	if hops > 0 {
		r = &t.seq
	}
	if len(r.id) < r.size {
		r.id, r.gen = append(r.id, id), append(r.gen, t.gen)
	} else {
		t.drop(r.id[r.next], r.gen[r.next]) // when it is still there
		r.id[r.next], r.gen[r.next] = id, t.gen
		r.next = (r.next + 1) % r.size
	}
	t.ends[id] = append(t.ends[id], rangeEnd{pos, st, t.gen})
}

// drop forgets the end of copy id of generation gen, if it is still
// remembered. Caller holds t.mu.
func (t *rangeTracker) drop(id remotelog.SegmentID, gen uint64) {
	ends := t.ends[id]
	for i, e := range ends {
		if e.gen == gen {
			ends[i] = ends[len(ends)-1]
			ends = ends[:len(ends)-1]
			break
		}
	}
	if len(ends) == 0 {
		delete(t.ends, id)
	} else {
		t.ends[id] = ends
	}
}
