package cache

import (
	"context"
	"sync/atomic"
)

// Pin holds, for one reader, the chunks of a byte range of an object:
// what the reader has had loaded stays readable to it even when the
// memory tier evicts it meanwhile (under memory pressure a reader would
// otherwise load the same bytes again for each look). A Pin is used by
// one goroutine; Release may be called from another once that goroutine
// is done with it.
//
// The slices a Pin returns (View, Slices) share the chunks' memory: they
// must be read only, and only until Release. A Pin holds one reference to
// each chunk's slot (see slot), so that the slot's buffer goes back to the
// pool, to be filled with another chunk, only after Release (and after
// every other holder let go). A Pin never released keeps its chunks out
// of the pool (the garbage collector frees them as usual). Cache.Pinned
// counts the Pins not yet released.
type Pin struct {
	c        *Cache
	obj      Object
	off, end int64
	first    int64   // chunk index of slots[0]
	slots    []*slot // per chunk, the slot holding its part of the range
	released atomic.Bool
}

// Pin starts the loads of bytes [off, off+n) of obj that are neither
// cached nor in flight (one GET for each run of consecutive chunks) and
// holds their chunks (a reference to each slot, which touch took) for
// the caller until Release; it does not wait for them.
func (c *Cache) Pin(obj Object, off, n int64) *Pin { return c.pin(obj, off, n, noLimit) }

// PinAhead is Pin for a sequential reader that says how far it may be
// read ahead: a load it starts for a chunk takes the bytes asked (from a
// byte inside the chunk at least minLoad, as a cold read's load does) and
// then the next ahead bytes past the range that lie in that chunk, and no
// more: it never grows a cached part to twice its length, as the cache's
// own rule does for a read going on past it. Its loads get room to grow
// in place to the chunk's end (the reader's next windows copy nothing).
// ahead <= 0 is Pin (a random read, or a reader not yet known to be
// sequential). While the cache is crowded (crowd.go) there is no
// read-ahead, as for Pin.
func (c *Cache) PinAhead(obj Object, off, n, ahead int64) *Pin {
	if ahead <= 0 {
		return c.pin(obj, off, n, noLimit)
	}
	return c.pin(obj, off, n, off+n+min(ahead, obj.Size))
}

func (c *Cache) pin(obj Object, off, n, limit int64) *Pin {
	p := &Pin{c: c, obj: obj, off: off, end: off + n, slots: c.touch(obj, off, n, limit)}
	c.pins.Add(1)
	if p.slots == nil {
		p.end = off // empty: every View goes to the cache
		return p
	}
	p.first = off / c.cfg.ChunkBytes
	return p
}

// Release gives the pinned chunks back: the slices the Pin returned must
// not be read afterwards, as the chunks' buffers may then be reused for
// other chunks. Views after Release are copies (Cache.Read).
// Calls after the first do nothing.
func (p *Pin) Release() {
	if p.released.Swap(true) {
		return
	}
	p.c.unrefAll(p.slots)
	p.c.pins.Add(-1)
}

// Pinned returns the number of Pins not yet released (for tests and
// accounting).
func (c *Cache) Pinned() int64 { return c.pins.Load() }

// within reports whether bytes [off, off+n) lie in the pinned range of a
// Pin not yet released.
func (p *Pin) within(off, n int64) bool {
	return n > 0 && off >= p.off && off+n <= p.end && !p.released.Load()
}

// View returns bytes [off, off+n), waiting until ctx ends for bytes
// still arriving: within the pin a slice of the pinned chunk, valid until
// Release (a copy when the range spans chunks); outside it (or after
// Release) a copy (Cache.Read), so that no chunk's buffer escapes the
// pool. Errors: as Cache.View's.
func (p *Pin) View(ctx context.Context, off, n int64) ([]byte, error) {
	if !p.within(off, n) {
		return p.c.Read(ctx, p.obj, off, n, nil)
	}
	cb := p.c.cfg.ChunkBytes
	first, last := off/cb, (off+n-1)/cb
	if first == last {
		i := first
		return p.slots[i-p.first].wait(ctx, off-i*cb, off+n-i*cb)
	}
	return gather(ctx, p.slots[first-p.first:last-p.first+1], first, cb, off, n, p.obj.Size)
}

// Slices appends to dst the bytes [off, off+n) as views of the chunks that
// hold them, one slice per chunk, in order, without copying; they are
// valid until Release. It waits until ctx ends for bytes still arriving.
// A range outside the pin (or after Release) is appended as one slice
// that is a copy (Cache.Read), so that no chunk's buffer escapes the
// pool. Errors: as View's.
func (p *Pin) Slices(ctx context.Context, off, n int64, dst [][]byte) ([][]byte, error) {
	if n <= 0 {
		return dst, nil
	}
	if !p.within(off, n) {
		v, err := p.c.Read(ctx, p.obj, off, n, nil)
		if err != nil {
			return dst, err
		}
		return append(dst, v), nil
	}
	cb := p.c.cfg.ChunkBytes
	for i := off / cb; i <= (off+n-1)/cb; i++ {
		a, b := max(off-i*cb, 0), min(off+n-i*cb, cb)
		v, err := p.slots[i-p.first].wait(ctx, a, b)
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// Arrived reports whether bytes [off, off+n) of the pinned range are all
// in memory, so that reading them would not wait. It is false for bytes
// outside the pin, after Release and for a failed load.
func (p *Pin) Arrived(off, n int64) bool {
	if !p.within(off, n) {
		return false
	}
	cb := p.c.cfg.ChunkBytes
	for i := off / cb; i <= (off+n-1)/cb; i++ {
		b := min(off+n-i*cb, cb)
		if !p.slots[i-p.first].arrived(b) {
			return false
		}
	}
	return true
}

// arrived reports whether chunk-relative bytes up to b have arrived (the
// caller holds a reference).
func (s *slot) arrived(b int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(s.n) >= b-s.from
}
