package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// bufPool keeps the buffers that no one uses any more, so that the next
// load fills one of them instead of allocating (and zeroing, and on a
// growing heap page-faulting) a new one: buffers of whole chunks, and
// buffers of parts (a cold read's load, about max_bytes) by capacity in
// steps of partStep bytes. A part's buffer has the capacity of its step
// and the length the load asked; the memory budget counts the length, so
// a pooled part may hold up to partStep-1 bytes more than counted. The
// pools are sync.Pools: buffers nobody takes are freed at the next
// garbage collections, so idle buffers do not outlive the load that made
// them by long.
type bufPool struct {
	size  int64
	p     sync.Pool   // of *[]byte, len and cap size
	parts []sync.Pool // of *[]byte, cap (i+1)*partStep

	// live, when set (tests), maps the first byte of each pooled buffer
	// handed out and not yet back, to check that one buffer never backs
	// two live slots.
	mu     sync.Mutex
	live   map[*byte]bool
	reused atomic.Int64 // buffers taken from the pool
}

// partStep is the capacity step of pooled part buffers for chunks of
// size bytes: 1/256 of the chunk (64 KiB for 16 MiB chunks), at least
// 4 KiB.
func partStep(size int64) int64 { return max(size/256, 4096) }

func newBufPool(size int64) bufPool {
	return bufPool{size: size, parts: make([]sync.Pool, (size+partStep(size)-1)/partStep(size))}
}

// class returns the pool for buffers of capacity c, or nil when c is not
// a pooled capacity.
func (p *bufPool) class(c int64) *sync.Pool {
	if c == p.size {
		return &p.p
	}
	step := partStep(p.size)
	if c <= 0 || c%step != 0 || c/step > int64(len(p.parts)) {
		return nil
	}
	return &p.parts[c/step-1]
}

// get returns a buffer of n bytes (at most the chunk size), not zeroed
// when it comes from the pool; pooled says it is the pool's.
func (p *bufPool) get(n int64) (buf []byte, pooled bool) { return p.getCap(n, n) }

// getCap is get for a buffer with room for at least want bytes (its
// capacity; want at most the chunk size).
func (p *bufPool) getCap(n, want int64) (buf []byte, pooled bool) {
	c := max(n, want)
	if c != p.size {
		step := partStep(p.size)
		c = (c + step - 1) / step * step
	}
	pl := p.class(c)
	if pl == nil || n <= 0 {
		return make([]byte, n, max(c, n)), false
	}
	if v := pl.Get(); v != nil {
		buf = (*v.(*[]byte))[:n]
		p.reused.Add(1)
	} else {
		buf = make([]byte, n, c)
	}
	if p.live != nil {
		p.mu.Lock()
		if p.live[&buf[:1][0]] {
			p.mu.Unlock()
			panic(fmt.Sprintf("cache: pooled buffer %p handed out twice", &buf[:1][0]))
		}
		p.live[&buf[:1][0]] = true
		p.mu.Unlock()
	}
	return buf, true
}

func (p *bufPool) put(buf []byte) {
	buf = buf[:cap(buf)]
	pl := p.class(int64(cap(buf)))
	if pl == nil {
		return
	}
	if p.live != nil {
		p.mu.Lock()
		if !p.live[&buf[0]] {
			p.mu.Unlock()
			panic(fmt.Sprintf("cache: buffer %p put back to the pool twice", &buf[0]))
		}
		delete(p.live, &buf[0])
		p.mu.Unlock()
	}
	pl.Put(&buf)
}

// unref drops a reference to s; the last one gives a pooled buffer back
// to the pool unless a slice of it escaped.
func (c *Cache) unref(s *slot) {
	if s.refs.Add(-1) != 0 {
		return
	}
	if s.pooled && !s.escaped.Load() {
		s.mu.Lock()
		buf := s.buf
		s.buf = nil // a use after the last reference fails loudly
		s.mu.Unlock()
		c.pool.put(buf)
	}
	if s.base != nil { // the part whose buffer this one grew in place
		c.unref(s.base)
	}
}

// dropped is the memory tier's callback for a slot leaving it: an unread
// prefetch leaves the prefetch budget (wasted), and the tier's reference
// goes.
func (c *Cache) dropped(s *slot) {
	c.pfDone(s, "evicted")
	c.unref(s)
}

// escape marks that a slice of s goes to a caller that will not give it
// back (Cache.View), so its buffer is never pooled. The caller holds a
// reference.
func escape(s *slot) {
	for ; s != nil; s = s.base { // a part grown in place shares its base's buffer
		s.escaped.Store(true)
	}
}
