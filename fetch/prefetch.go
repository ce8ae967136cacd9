package fetch

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tierd/tierd/fetch/cache"
	"github.com/tierd/tierd/internal/remotelog"
)

// seqTracker remembers where recent fetches ended (segment, file
// position) and the read-ahead state of the reader that made each, so
// that a fetch starting exactly there is known to come from a sequential
// reader, and continues that reader's read-ahead. It holds at most
// seqTrackerSize positions, oldest forgotten first.
type seqTracker struct {
	mu   sync.Mutex
	set  map[seqPos]*readAhead
	ring []seqPos
	next int
}

type seqPos struct {
	id  remotelog.SegmentID
	pos int64
}

// readAhead is one sequential reader's read-ahead: the prefetches it
// started that may still be loading, so that it holds at most
// remote.fetch.prefetch.gets GETs at once.
type readAhead struct {
	mu      sync.Mutex
	loading []chunkRef
}

type chunkRef struct {
	obj cache.Object
	i   int64
}

const seqTrackerSize = 4096

func newSeqTracker() *seqTracker {
	return &seqTracker{set: map[seqPos]*readAhead{}, ring: make([]seqPos, 0, seqTrackerSize)}
}

// ended records that a fetch of reader st ended at p.
func (t *seqTracker) ended(p seqPos, st *readAhead) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.set[p]; ok {
		t.set[p] = st
		return
	}
	if len(t.ring) < seqTrackerSize {
		t.ring = append(t.ring, p)
	} else {
		delete(t.set, t.ring[t.next])
		t.ring[t.next] = p
		t.next = (t.next + 1) % seqTrackerSize
	}
	t.set[p] = st
}

func (t *seqTracker) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set, t.ring, t.next = map[seqPos]*readAhead{}, t.ring[:0], 0
}

// continues returns the reader whose earlier fetch ended at p, or nil
// when a fetch starting at p continues none.
func (t *seqTracker) continues(p seqPos) *readAhead {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set[p]
}

// afterFetch counts the bytes a fetch served, records where it ended and,
// when it continued an earlier one (a sequential reader), prefetches
// whole chunks up to remote.fetch.prefetch.max.bytes past its end, across
// segment boundaries into the following copies (rest: the finished copies
// after the one read, in offset order), with at most
// remote.fetch.prefetch.gets of the reader's prefetches loading at once.
// The cache's admission control may skip any of them (the shared
// prefetch budget, GET slots, memory); the reader's next fetch tries
// again. A reader that jumps elsewhere is a new, non-sequential reader:
// nothing is prefetched for it until it reads on from where it landed.
func (s *Server) afterFetch(meta remotelog.SegmentMetadata, start, end int64, rest []remotelog.SegmentMetadata) {
	s.pm.served.Add(float64(end - start))
	endPos := seqPos{meta.ID, end}
	if end >= meta.SizeInBytes && len(rest) > 0 {
		endPos = seqPos{rest[0].ID, 0} // the next fetch reads the next copy
	}
	st := s.seq.continues(seqPos{meta.ID, start})
	if st == nil {
		s.seq.ended(endPos, &readAhead{})
		return
	}
	s.seq.ended(endPos, st)
	cfg := s.conf()
	if cfg.PrefetchBytes <= 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	loading := st.loading[:0]
	for _, r := range st.loading {
		if s.cache.Loading(r.obj, r.i) {
			loading = append(loading, r)
		}
	}
	st.loading = loading
	cb := s.cache.ChunkBytes()
	depth := cfg.PrefetchBytes
	from := end // chunks from the one holding the next byte
	for j := -1; j < len(rest) && depth > 0 && len(st.loading) < cfg.PrefetchGets; j++ {
		m := meta
		if j >= 0 {
			m = rest[j]
		}
		if _, ok := s.idx.get(indexKey{m.ID, remotelog.OffsetIndex}); j >= 0 && !ok {
			// The reader will need this copy's offset index too; a failed
			// load is tried again by the read.
			go func() { _, _ = s.offsetIndex(s.bg, m) }()
		}
		obj := s.object(m)
		for i := from / cb; i*cb < m.SizeInBytes && depth > 0 && len(st.loading) < cfg.PrefetchGets; i++ {
			switch s.cache.Prefetch(obj, i) { // counted by the cache
			case cache.PrefetchStarted:
				st.loading = append(st.loading, chunkRef{obj, i})
			case cache.PrefetchSkipped:
				return // no room now; the next fetch tries again
			}
			depth -= min(cb, m.SizeInBytes-i*cb)
		}
		from = 0
	}
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
