package cache

// This file starts prefetches: loads of chunks, or parts of chunks, for
// sequential readers, under the admission control of prefetchbudget.go.

// Prefetch starts loading chunk i of obj whole (or, when a part of it
// from some byte on is cached, the rest after that part) unless it is
// cached (in memory, or whole on disk) or in flight (PrefetchPresent) or
// admission control refuses it (PrefetchSkipped): the cache is crowded
// (crowd.go), the shared prefetch budget
// (remote.fetch.prefetch.budget.bytes) is full, no GET slot is free (a
// prefetch never waits for one, and leaves one for demand reads), or the
// memory budget has no room without evicting other prefetched chunks.
func (c *Cache) Prefetch(obj Object, i int64) PrefetchOutcome {
	return c.PrefetchFor(obj, i, nil)
}

// PrefetchFor is Prefetch for reader r (nil: none): the chunk stays
// unexpired in the prefetch budget while r keeps reading (Cache.Active).
func (c *Cache) PrefetchFor(obj Object, i int64, r *Reader) PrefetchOutcome {
	if i < 0 || i*c.cfg.ChunkBytes >= obj.Size {
		return PrefetchPresent
	}
	return c.PrefetchPart(obj, i, 0, c.chunkLen(obj.Size, i), r)
}

// PrefetchPart is PrefetchFor for the chunk-relative bytes [from, to) of
// chunk i only: PrefetchRange within one chunk.
func (c *Cache) PrefetchPart(obj Object, i, from, to int64, r *Reader) PrefetchOutcome {
	if i < 0 || i*c.cfg.ChunkBytes >= obj.Size {
		return PrefetchPresent
	}
	out, _ := c.PrefetchRange(obj, i*c.cfg.ChunkBytes+from, i*c.cfg.ChunkBytes+min(to, c.cfg.ChunkBytes), r)
	return out
}

// PrefetchRange prefetches object bytes [off, end) for reader r (nil:
// none), a sequential reader's read-ahead window, with one GET: in the
// chunk holding off, the bytes from off (PrefetchPresent when they are
// cached or loading); when the memory tier holds a part of that chunk
// that reaches off (it ends at or after it), or a load in flight fills
// one, the load extends the one that goes furthest, whose bytes are
// taken over (in place when it left room, else copied once they are in),
// not loaded again; a cached part that starts after off is extended the
// same way, from its first byte; otherwise the load's part takes the
// chunk's place in the memory tier (its reader reads on from it). When
// that part ends at its chunk's end, the same GET goes on into the next
// chunks that nothing holds yet, from their first byte, up to end. It
// returns what it did and next, the object byte after the bytes it
// started loading (or found held, or skipped: where a caller goes on).
// Each part gets room to grow in place to its chunk's end, as its
// reader's next windows extend it. Admission control is Prefetch's, for
// the bytes of all the parts together.
func (c *Cache) PrefetchRange(obj Object, off, end int64, r *Reader) (PrefetchOutcome, int64) {
	cb := c.cfg.ChunkBytes
	end = min(end, obj.Size)
	if off < 0 || off >= end {
		return PrefetchPresent, max(off, end)
	}
	i := off / cb
	whole := c.chunkLen(obj.Size, i)
	from, to := off-i*cb, min(end-i*cb, whole)
	k := key(obj.Key, i)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, _, held, _ := c.lookupLocked(k, from, to)
	if s == nil {
		held = c.reaching(k, from, held)
	}
	if s != nil || (held != nil && held.to >= to) {
		// Cached or loading, or the suffix a sequential reader reads on
		// into is.
		for _, x := range []*slot{s, held} {
			if x != nil {
				c.unref(x)
			}
		}
		return PrefetchPresent, i*cb + to
	}
	if c.disk != nil && c.disk.holds(k, whole) {
		// The disk tier has the whole chunk: the reader's read takes it
		// from there, with no GET.
		if held != nil {
			c.unref(held)
		}
		return PrefetchPresent, i*cb + to
	}
	replaces := false
	if held != nil && held.to < from {
		// A gap between the cached part and the window: the new part
		// replaces the cached one.
		c.unref(held)
		held, replaces = nil, true
	}
	if held != nil { // the window after the part cached, which it extends
		from = held.from
	}
	// The part gets room to grow in place to the chunk's end; growing in
	// place takes no new memory and copies nothing (see Cache.extend).
	room := whole - from
	need := room
	if held != nil && !held.grown && to-from <= held.room {
		need = 0
	} else if held != nil && !held.isDone() {
		// A copy of a part still loading would hold memory while it
		// waits for that load, which may itself wait for memory: the
		// reader's next read tries again.
		c.unref(held)
		return PrefetchPresent, i*cb + to
	}
	want := to - from
	// The chunks after it that nothing holds, from their first byte: the
	// same GET goes on into them.
	type next struct {
		i, to int64
		k     chunkKey
	}
	var more []next
	for j, at := i+1, to; at == c.chunkLen(obj.Size, j-1) && j*cb < end; j++ {
		kj := key(obj.Key, j)
		if c.mem.has(kj) || len(c.inflight[kj]) > 0 || (c.disk != nil && c.disk.holds(kj, c.chunkLen(obj.Size, j))) {
			break
		}
		at = min(end-j*cb, c.chunkLen(obj.Size, j))
		more = append(more, next{j, at, kj})
		want += at
		need += c.chunkLen(obj.Size, j)
	}
	if c.isCrowded() {
		if held != nil {
			c.unref(held)
		}
		// No admission while crowded, but stale prefetches (of readers
		// that stopped) expire as they would at one: else they would keep
		// their budget, and their place in the memory tier ahead of the
		// crowded readers' parts, until the crowd ends.
		c.pfExpire()
		c.m.prefetchSkipped.WithLabelValues("crowded").Inc()
		return PrefetchSkipped, off
	}
	skip := func(reason string) (PrefetchOutcome, int64) {
		if held != nil {
			c.unref(held)
		}
		c.m.prefetchSkipped.WithLabelValues(reason).Inc()
		return PrefetchSkipped, off
	}
	before, ok := c.pfAdmit(want)
	if !ok {
		return skip("budget")
	}
	if c.pfGets.Load() >= int32(max(1, c.cfg.MaxInflightGets-1)) {
		c.pfUnadmit(want)
		return skip("gets")
	}
	select {
	case c.sem <- struct{}{}:
	default:
		c.pfUnadmit(want)
		return skip("gets")
	}
	if !c.mem.tryReserve(need, before) {
		<-c.sem
		c.pfUnadmit(want)
		return skip("memory")
	}
	c.pfGets.Add(1)
	s = newSlot(from, to, 2) // the cache's and the load's
	s.owner, s.newer = r, replaces
	if held != nil {
		c.pfDone(held, "extended")
		c.extend(s, held, room)
	} else {
		s.room, s.reserved = room, room
	}
	parts := []part{{i, k, s}}
	for _, m := range more {
		x := newSlot(0, m.to, 2)
		x.owner, x.room = r, c.chunkLen(obj.Size, m.i)
		x.reserved = x.room
		parts = append(parts, part{m.i, m.k, x})
	}
	for _, p := range parts {
		c.pfTrack(p.s)
		c.inflight[p.k] = append(c.inflight[p.k], p.s)
		c.m.misses.Inc()
		c.m.prefetches.Inc()
	}
	c.start(obj, parts, true)
	last := parts[len(parts)-1]
	return PrefetchStarted, last.i*cb + last.s.to
}
