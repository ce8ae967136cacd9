package cache

import "context"

// Pin holds, for one reader, the chunks of a byte range of an object:
// what the reader has had loaded stays readable to it even when the
// memory tier evicts it meanwhile (under memory pressure a reader would
// otherwise load the same bytes again for each look). Slices its View
// returns stay valid until Release; after Release the pinned chunks'
// buffers may be reused for other chunks. A Pin never released keeps
// them out of the buffer pool (the garbage collector frees them as
// before). A Pin is used by one goroutine.
type Pin struct {
	c        *Cache
	obj      Object
	off, end int64
	first    int64   // chunk index of slots[0]
	slots    []*slot // per chunk, the slot holding its part of the range
}

// Pin starts the loads of bytes [off, off+n) of obj that are neither
// cached nor in flight (one GET for each run of consecutive chunks) and
// holds their chunks for the caller; it does not wait for them.
func (c *Cache) Pin(obj Object, off, n int64) *Pin {
	p := &Pin{c: c, obj: obj, off: off, end: off + n, slots: c.touch(obj, off, n)}
	if p.slots == nil {
		p.end = off // empty: every View goes to the cache
		return p
	}
	p.first = off / c.cfg.ChunkBytes
	return p
}

// Release gives the pinned chunks back: slices of them that View returned
// must not be used after it. Views after Release go to the cache (as
// Cache.View). Release is idempotent.
func (p *Pin) Release() {
	p.c.unrefAll(p.slots)
	p.slots, p.end = nil, p.off
}

// View returns bytes [off, off+n) as Cache.View does, from the pinned
// chunks when the range lies within the pin (the slice is valid until
// Release), waiting until ctx ends for bytes still arriving.
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
