package fetch

import (
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// seqTracker remembers where recent fetches ended (segment, file
// position), so that a fetch starting exactly there is known to come from
// a sequential reader. It holds at most seqTrackerSize positions, oldest
// forgotten first.
type seqTracker struct {
	mu   sync.Mutex
	set  map[seqPos]struct{}
	ring []seqPos
	next int
}

type seqPos struct {
	id  remotelog.SegmentID
	pos int64
}

const seqTrackerSize = 4096

func newSeqTracker() *seqTracker {
	return &seqTracker{set: map[seqPos]struct{}{}, ring: make([]seqPos, 0, seqTrackerSize)}
}

// ended records that a fetch ended at p.
func (t *seqTracker) ended(p seqPos) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.set[p]; ok {
		return
	}
	if len(t.ring) < seqTrackerSize {
		t.ring = append(t.ring, p)
	} else {
		delete(t.set, t.ring[t.next])
		t.ring[t.next] = p
		t.next = (t.next + 1) % seqTrackerSize
	}
	t.set[p] = struct{}{}
}

func (t *seqTracker) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set, t.ring, t.next = map[seqPos]struct{}{}, t.ring[:0], 0
}

// continues reports whether a fetch starting at p continues an earlier
// one.
func (t *seqTracker) continues(p seqPos) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.set[p]
	return ok
}

// afterFetch records where a fetch ended and, when it continued an earlier
// one, prefetches up to remote.fetch.prefetch.max.bytes past its end,
// across segment boundaries into the following copies (rest: the finished
// copies after the one read, in offset order).
func (s *Server) afterFetch(meta remotelog.SegmentMetadata, start, end int64, rest []remotelog.SegmentMetadata) {
	endPos := seqPos{meta.ID, end}
	if end >= meta.SizeInBytes && len(rest) > 0 {
		endPos = seqPos{rest[0].ID, 0} // the next fetch reads the next copy
	}
	sequential := s.seq.continues(seqPos{meta.ID, start})
	s.seq.ended(endPos)
	if !sequential || s.conf().PrefetchBytes <= 0 {
		return
	}
	cb := s.cache.ChunkBytes()
	budget := s.conf().PrefetchBytes
	from := end // chunks from the one holding the next byte
	for j := -1; j < len(rest) && budget > 0; j++ {
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
		for i := from / cb; i*cb < m.SizeInBytes && budget > 0; i++ {
			s.cache.Prefetch(obj, i) // counted by the cache
			budget -= min(cb, m.SizeInBytes-i*cb)
		}
		from = 0
	}
}
