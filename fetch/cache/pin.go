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
// must be read only, and only until Release. Each chunk counts the Pins
// holding it (slot.pins), so that a cache recycling chunk memory can
// leave alone a chunk that a Pin, or a response still being written from
// one, holds. Cache.Pinned counts the Pins not yet released.
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
// holds their chunks for the caller until Release; it does not wait for
// them.
func (c *Cache) Pin(obj Object, off, n int64) *Pin {
	p := &Pin{c: c, obj: obj, off: off, end: off + n, slots: c.touch(obj, off, n)}
	c.pins.Add(1)
	if p.slots == nil {
		p.end = off // empty: every View goes to the cache
		return p
	}
	for _, s := range p.slots {
		s.pins.Add(1)
	}
	p.first = off / c.cfg.ChunkBytes
	return p
}

// Release lets go of the pinned chunks. The slices the Pin returned must
// not be read afterwards. Calls after the first do nothing.
func (p *Pin) Release() {
	if p.released.Swap(true) {
		return
	}
	for _, s := range p.slots {
		s.pins.Add(-1)
	}
	p.c.pins.Add(-1)
}

// Pinned returns the number of Pins not yet released (for tests, and a
// recycling cache's accounting).
func (c *Cache) Pinned() int64 { return c.pins.Load() }

// View returns bytes [off, off+n) as Cache.View does, from the pinned
// chunks when the range lies within the pin, waiting until ctx ends for
// bytes still arriving.
func (p *Pin) View(ctx context.Context, off, n int64) ([]byte, error) {
	if n <= 0 || off < p.off || off+n > p.end {
		return p.c.View(ctx, p.obj, off, n)
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
// hold them, one slice per chunk, in order, without copying; it waits
// until ctx ends for bytes still arriving. A range outside the pin is read
// with Cache.View (one slice, a copy when it spans chunks). Errors: as
// View's.
func (p *Pin) Slices(ctx context.Context, off, n int64, dst [][]byte) ([][]byte, error) {
	if n <= 0 {
		return dst, nil
	}
	if off < p.off || off+n > p.end {
		v, err := p.c.View(ctx, p.obj, off, n)
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
// outside the pin and for a failed load.
func (p *Pin) Arrived(off, n int64) bool {
	if n <= 0 || off < p.off || off+n > p.end {
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

// arrived reports whether chunk-relative bytes up to b have arrived.
func (s *slot) arrived(b int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(s.n) >= b-s.from
}
