package remoteread

import (
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread/cache"
)

// This file sizes a sequential reader's read-ahead and starts it, for
// both read paths: ReadRemote's chains of fetches (prefetch.go) and
// WriteLogRange's chains of byte ranges (logrange.go).
//
// A chain is read ahead by at most its window: an aheadShare-th of the
// bytes its reads have taken so far, and at most
// remote.fetch.prefetch.max.bytes. Whatever the reader does next, what
// was loaded for it and never served is then at most that share of what
// it was served: a reader that stops after 4 MiB leaves at most 0.5 MiB
// unread, where whole-chunk read-ahead of up to 64 MiB left tens of
// times its bytes (the readers_N bench's 8 readers of 4 MiB each fetched
// 2.4-2.8 bytes per byte served, one reader of 32 MiB 3.4). A reader that
// goes on gets a window that grows with it, to the whole depth after
// aheadShare times the depth (512 MiB at the defaults).
//
// The window is filled two ways. A read that must load anyway takes the
// window along (cache.PinAhead: its load goes on past the bytes asked,
// within their chunk). After each read, topUp starts prefetches of the
// bytes past the read's end that nothing holds yet, once less than half
// the window is held: each top-up loads at least half a window, so that
// a part of a chunk is extended (and copied) once per half window read
// rather than at every read.

// aheadShare bounds a chain's read-ahead to this fraction of what it has
// taken: 1/8, so that with a fetch's own overshoot (the bytes to the next
// offset index entry) and the copies' offset indexes the bytes fetched
// stay under 1.2 per byte served, the bound set for 8 concurrent
// readers.
const aheadShare = 8

// window returns how far past its end chain st is read ahead, bytes,
// when it has continued hops times: none before minHops, else an
// aheadShare-th of the bytes it has taken, at most
// remote.fetch.prefetch.max.bytes. The caller holds st.mu.
func (s *Engine) window(st *readAhead, hops int) int64 {
	if hops < minHops {
		return 0
	}
	return min(s.conf().PrefetchBytes, st.taken/aheadShare)
}

// demandAhead returns the read-ahead that a read continuing chain st (nil:
// none) takes along with a load it makes: the chain's window once this
// read has continued it.
func (s *Engine) demandAhead(st *readAhead) int64 {
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return s.window(st, st.hops+1)
}

// topUp reads ahead for chain st from position pos of copy m on (and on
// into the copies of rest, in offset order; nil: none, the read-ahead
// stops at m's end): it finds the first byte from pos that no cached part
// or load in flight holds and, when that is less than half the chain's
// window past pos, starts prefetches of the bytes from there to pos +
// window, one GET for each run of chunks nothing holds (see
// cache.PrefetchRange), at most
// remote.fetch.prefetch.gets of the chain's loads at once, until the
// cache's admission control skips one (the next read tries again). With
// indexes set, a following copy it reads ahead into has its offset index
// loaded too (the reader will need it). objectOf names a copy's .log in
// the cache.
func (s *Engine) topUp(st *readAhead, objectOf func(remotelog.SegmentMetadata) cache.Object, m remotelog.SegmentMetadata, pos int64, rest []remotelog.SegmentMetadata, indexes bool) {
	cfg := s.conf()
	st.mu.Lock()
	defer st.mu.Unlock()
	w := s.window(st, st.hops)
	if w <= 0 {
		return
	}
	if st.reader == nil {
		st.reader = s.cache.NewReader()
	} else {
		s.cache.Active(st.reader)
	}
	loading := st.loading[:0]
	for _, r := range st.loading {
		if s.cache.Loading(r.obj, r.i) {
			loading = append(loading, r)
		}
	}
	st.loading = loading
	cb := s.cache.ChunkBytes()
	copyAt := func(j int) remotelog.SegmentMetadata {
		if j < 0 {
			return m
		}
		return rest[j]
	}
	// The first byte nothing holds, d bytes past pos: in copy j at p.
	j, p, d := -1, pos, int64(0)
	for d < w {
		c := copyAt(j)
		if p >= c.SizeInBytes {
			if j+1 >= len(rest) {
				return // held to the log's end
			}
			j, p = j+1, 0
			continue
		}
		i := p / cb
		to := i*cb + s.cache.CoveredTo(objectOf(c), i, p-i*cb)
		d += to - p
		gap := to < min((i+1)*cb, c.SizeInBytes)
		p = to
		if gap {
			break
		}
	}
	if d >= w/2 {
		return
	}
	indexed := -1
	for left := w - d; left > 0 && len(st.loading) < cfg.PrefetchGets; {
		c := copyAt(j)
		if p >= c.SizeInBytes {
			if j+1 >= len(rest) {
				return
			}
			j, p = j+1, 0
			continue
		}
		if indexes && j > indexed {
			indexed = j
			if _, ok := s.idx.get(indexKey{c.ID, remotelog.OffsetIndex}); !ok {
				// A failed load is tried again by the read.
				go func() { _, _ = s.offsetIndex(s.bg, c) }()
			}
		}
		obj := objectOf(c)
		out, next := s.cache.PrefetchRange(obj, p, min(c.SizeInBytes, p+left), st.reader) // counted by the cache
		switch out {
		case cache.PrefetchStarted:
			st.loading = append(st.loading, chunkRef{obj, p / cb})
		case cache.PrefetchSkipped:
			return // no room now; the next read tries again
		}
		left -= next - p
		p = next
	}
}
