package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrShortObject marks a load whose body ended cleanly (io.EOF) before
// the bytes asked for: the object is shorter than the size its reader
// gave (Object.Size), which a retry does not change, unlike a transfer
// that broke off. The error wraps io.ErrUnexpectedEOF too.
var ErrShortObject = errors.New("cache: the object ends before the bytes asked for")

// part is one chunk's slot in a load.
type part struct {
	i int64
	k chunkKey
	s *slot
}

// noLimit is the read-ahead limit of loads that follow the cache's own
// rules (claim).
const noLimit = -1

// claim finds a slot as find does, with a reference for the caller, but
// a new slot is only registered as in flight (isNew): the caller starts
// its load, alone or with the slots of the next chunks in one GET.
//
// lim is the chunk-relative byte a new load reads ahead to (it takes
// [a, b), then up to lim within the chunk, see PinAhead), or noLimit for
// the cache's own rules: at least minLoad from a byte inside the chunk,
// and a part twice as long when the load goes on past the cached part.
func (c *Cache) claim(obj Object, i int64, k chunkKey, a, b, lim int64) (s *slot, hit string, isNew bool) {
	c.mu.Lock()
	s, hit, held, _ := c.lookupLocked(k, a, b)
	c.mu.Unlock()
	if held != nil {
		c.unref(held)
	}
	if s != nil {
		c.used(s)
		return s, hit, false
	}
	if c.disk != nil { // read outside the lock: a disk read takes a while
		if from, data, ok := c.disk.get(k); ok {
			if s := doneSlot(from, data); s.covers(a, b) {
				s.ref() // the caller's
				if !c.mem.put(k, s) {
					c.unref(s) // the cache's
				}
				return s, "disk", false
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, hit, held, _ = c.lookupLocked(k, a, b)
	if s != nil {
		c.used(s)
		return s, hit, false
	}
	end := c.chunkLen(obj.Size, i)
	s = newSlot(a, b, 3) // the cache's, the load's and the caller's
	crowded := c.isCrowded()
	if !crowded {
		held = c.reaching(k, a, held)
	}
	ahead := int64(0) // the read-ahead a caller asked for, up to lim
	if lim != noLimit && !crowded {
		ahead = min(lim, end)
	}
	switch {
	case held != nil && held.from <= a && a <= held.to && !crowded:
		// A read going on past the cached part (or the part a load in
		// flight fills, once it is in): the part is
		// copied over, not loaded again, and the load takes the bytes
		// asked and the read-ahead asked for (lim), or by the cache's
		// own rule a part twice as long (or up to the chunk's end).
		// Doubling keeps the copies of a reader going on within about
		// the chunk's size, and what a random read landing there loads
		// within about the part cached.
		c.used(held) // its bytes go on to the reader in the new part
		grow := held.to + (held.to - held.from)
		if lim != noLimit {
			grow = ahead
		}
		s.to = min(end, max(b, a+c.minLoad(), grow))
		room := s.to - held.from
		if ahead > 0 {
			room = end - held.from // a sequential reader reads on to the chunk's end
		}
		c.extend(s, held, room)
		held = nil
	case a > 0:
		// A first load inside the chunk, or any load while the cache is
		// crowded (crowd.go), takes at least minLoad: a reader
		// asking for little now likely asks for more after. A read
		// elsewhere in a partly cached chunk loads its own bytes only (a
		// random reader costs about the bytes it reads).
		s.to = min(max(b, a+c.minLoad(), ahead), end)
	default:
		s.to = max(b, ahead)
	}
	s.newer = crowded // its reader reads on from it, not from the older part
	if s.pre == nil && s.base == nil {
		// Loads of nearby parts in flight: one load of the span of them
		// all, when it is short, so that concurrent readers of a region
		// end up sharing one part.
		lo, hi := s.from, s.to
		for _, x := range c.inflight[k] {
			lo, hi = min(lo, x.from), max(hi, x.to)
		}
		if hi-lo <= 2*c.minLoad() {
			s.from, s.to = lo, hi
		}
		// A part a sequential reader reads on from (read ahead for it)
		// gets room to grow in place to the chunk's end, where it most
		// likely reads on to: its next windows then take no copy and no
		// new buffer (a whole chunk's buffer, from the pool).
		s.room = s.to - s.from
		if ahead > 0 {
			s.room = end - s.from
		}
		s.reserved = s.room
	}
	if held != nil {
		c.unref(held)
	}
	c.inflight[k] = append(c.inflight[k], s)
	c.m.misses.Inc()
	return s, "", true
}

// reaching returns the part of chunk k that a new load reading on from
// chunk-relative byte a extends: of held (the memory tier's part, with a
// reference, or nil) and the parts loads in flight fill, the one that
// reaches a (from <= a <= to) and goes furthest, with a reference (held's
// is dropped when another is taken); held when none reaches a. Extending
// a part still in flight, rather than the memory tier's shorter one
// beside it, keeps two loads from fetching the same bytes (a read going
// on past a prefetch in flight): the new load copies the part once it is
// in (see waitPre). Caller holds c.mu.
func (c *Cache) reaching(k chunkKey, a int64, held *slot) *slot {
	best := held
	if best != nil && (best.from > a || a > best.to) {
		best = nil
	}
	for _, x := range c.inflight[k] {
		if x.from <= a && a <= x.to && (best == nil || x.to > best.to) && x.ref() {
			if best != nil && best != held {
				c.unref(best)
			}
			best = x
		}
	}
	if best == nil || best == held {
		return held
	}
	if held != nil {
		c.unref(held)
	}
	return best
}

// extend makes s, a new part [base.from, s.to) of a chunk, take base's
// bytes instead of loading them: in place, in base's buffer, when base
// left room for s there and no other part has taken that room (a part
// growing in place copies nothing and allocates nothing), else copied
// into a buffer of its own with capacity room (at least s's length).
// base's reference (the caller's) passes to s. Caller holds c.mu.
func (c *Cache) extend(s, base *slot, room int64) {
	s.from = base.from
	if !base.grown && s.to-s.from <= base.room {
		base.grown = true
		s.base, s.room, s.reserved = base, base.room, 0
		adopt(s)
		return
	}
	s.pre = base
	s.room = max(room, s.to-s.from)
	s.reserved = s.room
}

// adopt gives s, a part growing its base in place, the base's buffer
// and bytes once the base is in, so that a reader of those bytes that
// finds s (it covers more) gets them at once, not when s's GET answers.
func adopt(s *slot) {
	b := s.base
	b.mu.Lock()
	done, err, buf := b.done, b.err, b.buf
	b.mu.Unlock()
	if !done || err != nil {
		return
	}
	s.mu.Lock()
	if s.buf == nil {
		s.buf = buf[:s.to-s.from]
	}
	s.mu.Unlock()
	s.progress(int(b.to - b.from))
}

// waitPre waits until the part each of parts extends (slot.pre or
// slot.base) is in: a part still in flight when the load was made.
// Errors: that part's load's, or ctx's.
func waitPre(ctx context.Context, parts []part) error {
	for _, p := range parts {
		for _, x := range []*slot{p.s.pre, p.s.base} {
			if x != nil {
				if _, err := x.wait(ctx, x.from, x.to); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// minLoad is the least a load starting inside a chunk takes: a quarter
// chunk, at most 1 MiB.
func (c *Cache) minLoad() int64 { return min(c.cfg.ChunkBytes/4, 1<<20) }

// start loads parts (slots of consecutive chunks, each but the last
// ending at its chunk's end, each but the first starting at 0, none but
// the first extending a part: touch gives those a GET of their own) with one
// GET; prefetched says a prefetch's admission already took its GET slot
// and memory.
func (c *Cache) start(obj Object, parts []part, prefetched bool) {
	c.loads.Add(1)
	c.pending.Add(1)
	go c.load(obj, parts, prefetched)
}

// load fills the parts' slots from the store with one ranged GET: it
// takes a GET slot and reserves memory (a prefetch, prefetched, has both
// already), reads the bytes in order, wakes waiters as they arrive, and
// moves each chunk into the tiers as soon as it is whole.
func (c *Cache) load(obj Object, parts []part, prefetched bool) {
	defer c.loads.Done()
	defer c.pending.Add(-1)
	ctx, cancel := context.WithTimeout(c.root, c.cfg.LoadTimeout)
	defer cancel()
	var total int64 // the memory the loads take
	for _, p := range parts {
		total += p.s.reserved
	}
	fail := func(what string, err error) {
		for _, p := range parts {
			c.finish(p.k, p.s, fmt.Errorf("cache: waiting for %s for %s chunk %d: %w", what, obj.Key, p.i, err))
			c.unref(p.s) // the load's
		}
	}
	// A part extended while its own load was in flight must be in before
	// it is copied; a demand load waits for it before it takes a GET slot
	// (prefetches hold theirs, at most MaxInflightGets-1 of them, so a
	// demand load it waits for gets one).
	if err := waitPre(ctx, parts); err != nil {
		if prefetched {
			<-c.sem
			c.pfGets.Add(-1)
			for _, p := range parts {
				c.mem.release(p.s.reserved)
			}
		}
		fail("the part it extends", err)
		return
	}
	if b := parts[0].s.base; b != nil { // now that the base is in (touch gives such a part a GET of its own)
		adopt(parts[0].s)
	}
	if !prefetched {
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			fail("a GET slot", ctx.Err())
			return
		}
		if err := c.mem.reserve(ctx, total); err != nil {
			<-c.sem
			fail("memory", err)
			return
		}
	}
	done, err := c.fill(ctx, obj, parts)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (load ended: %w)", err, ctx.Err())
	}
	<-c.sem
	if prefetched {
		c.pfGets.Add(-1)
	}
	for _, p := range parts[done:] { // err != nil
		c.mem.release(p.s.reserved)
		c.finish(p.k, p.s, err)
		c.unref(p.s)
	}
	for _, p := range parts[:done] {
		if c.disk != nil {
			if err := c.disk.put(p.k, p.s.from, p.s.buf); err != nil {
				c.m.diskErrors.Inc() // the chunk is served anyway
			}
		}
		c.unref(p.s)
	}
}

// fill reads the parts' bytes from one GET and finishes each part as it
// completes; it returns how many parts it finished and the error that
// stopped it (the caller finishes the rest with it).
func (c *Cache) fill(ctx context.Context, obj Object, parts []part) (done int, err error) {
	first, last := parts[0], parts[len(parts)-1]
	start := first.i*c.cfg.ChunkBytes + first.s.from + first.s.preLen()
	end := last.i*c.cfg.ChunkBytes + last.s.to
	defer func() {
		if r := recover(); r != nil { // a bucket client bug must not take the daemon down
			err = fmt.Errorf("cache: load of %s bytes %d-%d panicked: %v", obj.Key, start, end, r)
		}
	}()
	rc, err := obj.Open(ctx, start, end)
	if err != nil {
		return 0, fmt.Errorf("cache: get %s bytes %d-%d: %w", obj.Key, start, end, err)
	}
	defer rc.Close()
	// A body that does not watch ctx is closed when the load's time is up
	// (or the cache closes), so its reads end.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	for _, p := range parts {
		got := p.s.to - p.s.from - p.s.preLen()
		if err := c.fillSlot(rc, p.s); err != nil {
			return done, fmt.Errorf("cache: read %s bytes %d-%d, chunk %d: %w", obj.Key, start, end, p.i, err)
		}
		c.m.loadedBytes.Add(float64(got))
		c.loaded.Add(got)
		c.mem.release(p.s.reserved) // before the whole chunk counts in the tier
		c.finish(p.k, p.s, nil)
		done++
	}
	return done, nil
}

// fillSlot reads a slot's bytes from r straight into its buffer (a pooled
// one, not zeroed, for a whole chunk), each read asking for all the bytes
// still missing, and announces them to waiters as each read returns, so
// that a reader gets what has arrived even when the body then stalls.
func (c *Cache) fillSlot(r io.Reader, s *slot) error {
	var buf []byte
	var pooled bool
	var n int
	if b := s.base; b != nil { // growing base's part in place: its bytes are there (adopt)
		s.mu.Lock()
		buf = s.buf
		s.mu.Unlock()
		n = int(b.to - b.from)
	} else {
		buf, pooled = c.pool.getCap(s.to-s.from, s.room)
	}
	s.mu.Lock()
	s.buf, s.pooled = buf, pooled
	s.mu.Unlock()
	if pre := s.pre; pre != nil { // the part cached already: copied, not loaded
		n = copy(buf, pre.buf[:pre.to-pre.from])
		s.pre = nil
		c.unref(pre)
		s.progress(n)
	}
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if m > 0 && n < len(buf) { // the last bytes are announced by finish, after the tiers have the chunk
			s.progress(n)
		}
		if err != nil && n < len(buf) {
			if errors.Is(err, io.EOF) {
				// The body ended cleanly: the object is shorter than
				// the bytes asked for, not a transfer that broke off.
				return fmt.Errorf("got %d of %d bytes: %w (%w)", n, len(buf), io.ErrUnexpectedEOF, ErrShortObject)
			}
			return fmt.Errorf("got %d of %d bytes: %w", n, len(buf), err)
		}
	}
	return nil
}
