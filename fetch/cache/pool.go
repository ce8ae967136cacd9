package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// bufPool keeps the buffers of whole chunks that no one uses any more, so
// that the next load of a whole chunk fills one of them instead of
// allocating (and zeroing) a new one. Only buffers of exactly the chunk
// size are pooled, so a pooled buffer's bytes are what the memory budget
// counts. The pool is a sync.Pool: buffers nobody takes are freed at the
// next garbage collections, so idle buffers do not outlive the load that
// made them by long.
type bufPool struct {
	size int64
	p    sync.Pool // of *[]byte, len and cap size

	// live, when set (tests), maps the first byte of each pooled buffer
	// handed out and not yet back, to check that one buffer never backs
	// two live slots.
	mu     sync.Mutex
	live   map[*byte]bool
	reused atomic.Int64 // buffers taken from the pool
}

// get returns a buffer of n bytes, not zeroed when it comes from the
// pool; pooled says it is the pool's (n is the chunk size).
func (p *bufPool) get(n int64) (buf []byte, pooled bool) {
	if n != p.size {
		return make([]byte, n), false
	}
	if v := p.p.Get(); v != nil {
		buf = *v.(*[]byte)
		p.reused.Add(1)
	} else {
		buf = make([]byte, n)
	}
	if p.live != nil {
		p.mu.Lock()
		if p.live[&buf[0]] {
			p.mu.Unlock()
			panic(fmt.Sprintf("cache: pooled buffer %p handed out twice", &buf[0]))
		}
		p.live[&buf[0]] = true
		p.mu.Unlock()
	}
	return buf, true
}

func (p *bufPool) put(buf []byte) {
	buf = buf[:cap(buf)]
	if p.live != nil {
		p.mu.Lock()
		if !p.live[&buf[0]] {
			p.mu.Unlock()
			panic(fmt.Sprintf("cache: buffer %p put back to the pool twice", &buf[0]))
		}
		delete(p.live, &buf[0])
		p.mu.Unlock()
	}
	p.p.Put(&buf)
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
func escape(s *slot) { s.escaped.Store(true) }
