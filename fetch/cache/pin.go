package cache

import "context"

// Pin holds, for one reader, the chunks of a byte range of an object:
// what the reader has had loaded stays readable to it even when the
// memory tier evicts it meanwhile (under memory pressure a reader would
// otherwise load the same bytes again for each look). A Pin is used by
// one goroutine.
type Pin struct {
	c        *Cache
	obj      Object
	off, end int64
	first    int64   // chunk index of slots[0]
	slots    []*slot // per chunk, the slot holding its part of the range
}

// Pin starts the loads of bytes [off, off+n) of obj, as Touch does, and
// holds their chunks for the caller; it does not wait for them.
func (c *Cache) Pin(obj Object, off, n int64) *Pin {
	p := &Pin{c: c, obj: obj, off: off, end: off + n}
	if off < 0 || n <= 0 || off+n > obj.Size {
		p.end = off // empty: every View goes to the cache
		return p
	}
	c.Touch(obj, off, n)
	cb := c.cfg.ChunkBytes
	p.first = off / cb
	for i := p.first; i <= (off+n-1)/cb; i++ {
		a, b := max(off-i*cb, 0), min(off+n-i*cb, c.chunkLen(obj.Size, i))
		k := key(obj.Key, i)
		s, ok := c.mem.get(k)
		if !ok || !s.covers(a, b) {
			s, _, _ = c.find(obj, i, k, a, b, false)
		}
		p.slots = append(p.slots, s)
	}
	return p
}

// View returns bytes [off, off+n) as Cache.View does, from the pinned
// chunks when the range lies within the pin, waiting until ctx ends for
// bytes still arriving.
func (p *Pin) View(ctx context.Context, off, n int64) ([]byte, error) {
	if n <= 0 || off < p.off || off+n > p.end {
		return p.c.View(ctx, p.obj, off, n)
	}
	cb := p.c.cfg.ChunkBytes
	first, last := off/cb, (off+n-1)/cb
	part := func(i int64) ([]byte, error) {
		a, b := max(off-i*cb, 0), min(off+n-i*cb, p.c.chunkLen(p.obj.Size, i))
		return p.slots[i-p.first].wait(ctx, a, b)
	}
	if first == last {
		return part(first)
	}
	out := make([]byte, 0, n)
	for i := first; i <= last; i++ {
		v, err := part(i)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}
