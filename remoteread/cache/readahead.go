package cache

import "context"

// This file holds what a caller that reads ahead for its sequential
// readers itself (package remoteread) asks of the cache besides Pin and
// Prefetch: how far from a byte the cache holds or loads an object's
// bytes already, and the bytes of a pinned range as they arrive.

// CoveredTo returns how far from chunk-relative byte from of chunk i of
// obj the bytes are cached or loading without a gap: the end of the
// memory tier's part that holds from, extended by the loads in flight
// that go on from there, or the chunk's length when the disk tier holds
// the whole chunk; from itself when nothing holds it. It starts no load
// and moves nothing in the LRU.
func (c *Cache) CoveredTo(obj Object, i, from int64) int64 {
	if i < 0 || i*c.cfg.ChunkBytes >= obj.Size || from < 0 {
		return from
	}
	whole := c.chunkLen(obj.Size, i)
	if from >= whole {
		return from
	}
	k := key(obj.Key, i)
	c.mu.Lock()
	to := from
	if a, b, ok := c.mem.span(k); ok && a <= to && to < b {
		to = b
	}
	for grew := true; grew && to < whole; {
		grew = false
		for _, s := range c.inflight[k] {
			if s.from <= to && to < s.to {
				to, grew = s.to, true
			}
		}
	}
	c.mu.Unlock()
	if to < whole && c.disk != nil && c.disk.holds(k, whole) {
		return whole
	}
	return to
}

// span returns the chunk-relative range of k's part in the memory tier.
func (l *lru) span(k chunkKey) (from, to int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.items[k]
	if !ok {
		return 0, 0, false
	}
	s := e.Value.(*entry).s
	return s.from, s.to, true
}

// ViewSome returns bytes of the pinned range from off on as they arrive:
// once at least least of them have (or all of [off, off+n) that lie in
// the chunk holding off, when fewer), as many as have arrived by then,
// at most n and never past that chunk's end. The slice shares the
// chunk's memory and is valid until Release. Outside the pin (or after
// Release) it is a copy of the bytes up to the chunk's end or off+n
// (Cache.Read). Errors: as View's.
func (p *Pin) ViewSome(ctx context.Context, off, n, least int64) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	cb := p.c.cfg.ChunkBytes
	i := off / cb
	n = min(n, (i+1)*cb-off, p.obj.Size-off)
	if !p.within(off, n) {
		return p.c.Read(ctx, p.obj, off, n, nil)
	}
	a := off - i*cb
	return p.slots[i-p.first].waitSome(ctx, a, a+n, a+max(min(least, n), 1))
}

// waitSome returns chunk-relative bytes [a, e) once bytes up to need (a
// < need <= b) have arrived, e being as far as they have arrived by then,
// at most b. The caller holds a reference.
func (s *slot) waitSome(ctx context.Context, a, b, need int64) ([]byte, error) {
	if _, err := s.wait(ctx, a, need); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := min(b, s.from+int64(s.n))
	return s.buf[a-s.from : e-s.from], nil
}
