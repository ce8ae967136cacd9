package remoteread

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
)

// seqTracker remembers where recent fetches ended (the copy and the
// offset a fetch going on from there asks for) and the read-ahead state
// of the reader chain that made each, so that a fetch starting exactly
// there is known to continue that chain. A fetch that continues a chain
// takes its end out (one entry per sequential reader) and leaves its own
// end in the chain's place.
//
// Ends of fetches that continued nothing (random reads, and first reads)
// go into a smaller ring of their own (freshSize), so that many random
// readers neither push sequential readers' ends out nor leave so many
// ends about that random reads often land on one by chance: a random
// read that does continues a chain of one, which starts no read-ahead
// (see afterFetch). Each ring forgets its oldest ends first.
//
// Two readers in step (two consumer groups reading a partition from the
// same offset) end their fetches at the same positions: an end already
// recorded for a chain that continued more often is kept, so that the
// leading chain keeps its hops and its read-ahead (which the other reader
// reads from too) instead of each reader's fetch starting the other's
// chain over.
type seqTracker struct {
	mu         sync.Mutex
	set        map[seqPos]trackedEnd
	fresh, seq endRing
	gen        uint64
}

// seqPos is where a fetch ended: the copy the next fetch reads and the
// offset it asks for.
type seqPos struct {
	id  remotelog.SegmentID
	off int64
}

// trackedEnd is a remembered end: its chain and the generation that
// names this entry in its ring (a ring forgetting an end deletes it only
// when it is still this entry).
type trackedEnd struct {
	st   *readAhead
	gen  uint64
	hops int // st's hops when it ended here
}

// endRing is a ring of remembered ends, oldest overwritten first.
type endRing struct {
	pos  []seqPos
	gen  []uint64
	next int
	size int
}

// readAhead is one sequential reader chain's read-ahead: how often it
// continued, how many bytes its reads took, and the prefetches it
// started that may still be loading, so that it holds at most
// remote.fetch.prefetch.gets GETs at once.
type readAhead struct {
	mu      sync.Mutex
	hops    int           // reads that continued the chain (0 for its first)
	taken   int64         // bytes its reads served, each byte once
	reader  *cache.Reader // keeps the chain's prefetches while it reads on
	loading []chunkRef
}

type chunkRef struct {
	obj cache.Object
	i   int64
}

// Sizes of seqTracker's rings: ends of sequential chains (about one per
// sequential reader), and ends of fetches that continued nothing.
const (
	seqTrackerSize = 4096
	freshSize      = 512
)

// minHops is how many fetches in a row must continue a chain before its
// read-ahead starts: one continuation may be a random read landing on
// another reader's end by chance.
const minHops = 2

func newSeqTracker() *seqTracker {
	return &seqTracker{set: map[seqPos]trackedEnd{}, fresh: endRing{size: freshSize}, seq: endRing{size: seqTrackerSize}}
}

// ended records that a fetch of chain st, which has continued hops
// times, ended at p: in the sequential ring when it continued the chain
// (hops > 0), else in the fresh one; unless another chain that continued
// more often ended at p too, whose end is kept.
func (t *seqTracker) ended(p seqPos, st *readAhead, hops int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.set[p]; ok && e.st != st && e.hops > hops {
		return
	}
	t.gen++
	r := &t.fresh
	if hops > 0 {
		r = &t.seq
	}
	if len(r.pos) < r.size {
		r.pos, r.gen = append(r.pos, p), append(r.gen, t.gen)
	} else {
		if old := r.pos[r.next]; t.set[old].gen == r.gen[r.next] {
			delete(t.set, old)
		}
		r.pos[r.next], r.gen[r.next] = p, t.gen
		r.next = (r.next + 1) % r.size
	}
	t.set[p] = trackedEnd{st, t.gen, hops}
}

func (t *seqTracker) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set = map[seqPos]trackedEnd{}
	t.fresh = endRing{size: freshSize}
	t.seq = endRing{size: seqTrackerSize}
}

// peek returns the chain whose earlier fetch ended at p, or nil, and
// leaves the end in place (a read looks before it knows it will answer).
func (t *seqTracker) peek(p seqPos) *readAhead {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set[p].st
}

// take returns the chain whose earlier fetch ended at p and forgets that
// end (the fetch starting there continues the chain), or nil when a
// fetch starting at p continues none.
func (t *seqTracker) take(p seqPos) *readAhead {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.set[p]
	if !ok {
		return nil
	}
	delete(t.set, p)
	return e.st
}

// afterFetch counts the bytes a fetch served (file positions [start,
// end) of meta, next the offset after its last batch; from names the
// copy and offset it was asked for, where a fetch it continues ended), records
// where it ended and, when it continued a chain that has now continued
// minHops times in a row (a sequential reader), tops up the chain's
// read-ahead (see topUp): at most remote.fetch.prefetch.max.bytes and an
// aheadShare-th of what the chain has taken past its end, across segment
// boundaries into the following copies (rest: the finished copies after
// the one read, in offset order), with at most remote.fetch.prefetch.gets
// of the chain's prefetches loading at once. A reader that jumps
// elsewhere starts a new chain: nothing is read ahead for it until it
// reads on from where it landed.
func (s *Engine) afterFetch(meta remotelog.SegmentMetadata, from seqPos, next, start, end int64, rest []remotelog.SegmentMetadata) {
	s.pm.served.Add(float64(end - start))
	endPos := seqPos{meta.ID, next}
	if next > meta.EndOffset && len(rest) > 0 {
		endPos = seqPos{rest[0].ID, next} // the next fetch reads the next copy
	}
	st := s.seq.take(from)
	if st == nil {
		st = &readAhead{}
	} else {
		st.mu.Lock()
		st.hops++
		st.mu.Unlock()
	}
	st.mu.Lock()
	st.taken += end - start
	hops := st.hops
	st.mu.Unlock()
	s.seq.ended(endPos, st, hops)
	if end >= meta.SizeInBytes && len(rest) == 0 {
		// The chain reached the log's end and cannot go on (a copy tiered
		// later starts at another object): its reader counts no more
		// among the active ones (see cache.Cache.Crowded).
		st.mu.Lock()
		if st.reader != nil {
			s.cache.ReaderDone(st.reader)
		}
		st.mu.Unlock()
		return
	}
	if hops < minHops {
		return
	}
	m, pos := meta, end
	if end >= meta.SizeInBytes {
		m, pos, rest = rest[0], 0, rest[1:]
	}
	s.topUp(st, s.object, m, pos, rest, true)
}

// prefetchMetrics count what reads served, beside what they fetched from
// the store (tierd_fetch_log_bytes_total): their ratio is the bytes
// fetched per byte served.
type prefetchMetrics struct {
	served prometheus.Counter
}

func newPrefetchMetrics(f promauto.Factory) prefetchMetrics {
	return prefetchMetrics{served: f.NewCounter(prometheus.CounterOpts{Name: "tierd_fetch_served_bytes_total",
		Help: "Bytes of remote .log answers (records) served by reads; with tierd_fetch_log_bytes_total, the bytes fetched per byte served."})}
}
