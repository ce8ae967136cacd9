package cache

import "time"

// This file counts the active sequential readers and says when they
// crowd the cache.
//
// A sequential reader holds the chunk it reads in the memory tier from
// one of its reads to the next, and read-ahead adds whole chunks past it:
// at least the next one. When more readers are active than the memory
// budget holds two chunks for (active readers x 2 x ChunkBytes > the
// memory budget), a reader's chunks are evicted between two of its reads
// or before it reaches them, and reads load them again: the readers_N
// bench's 64 readers with 16 MiB chunks and a 128 MiB budget fetched 3.2
// bytes per byte served, and with one chunk a reader as the bound 8
// readers still fetched 1.2-1.3 at 3 times the CPU per byte of 32
// crowded ones. While that holds the cache is
// crowded, and every load shrinks to what a cold random read loads: a
// part from the byte asked for, at least minLoad (a read going on past a
// cached part loads its own bytes rather than a part twice as long with
// the cached part copied in) and takes the chunk's place in the memory
// tier even from a larger part (its reader reads on from it), and no
// prefetch starts (PrefetchSkipped,
// reason "crowded"). Random readers' loads cost about 0.7-1.0 bytes
// fetched per byte served, which is what crowded sequential readers then
// cost too. With fewer readers nothing changes.
//
// A Reader is active from its last read (NewReader, Active) for
// readerIdle, or until ReaderDone; the count is taken at each sequential
// read and pruned of readers no longer active (at most every
// prunePeriod). It is counted in time, not
// in bytes loaded as prefetch expiry is: a crowd of readers loads a
// memory budget's worth between two reads of each of them, so a window
// of that many bytes would never count more readers than the budget
// holds chunks for.

// readerIdle is how long a sequential reader counts as active after its
// last read: a consumer polls again at once, and a store with latency
// answers within tens of ms, so a reader silent this long has most
// likely stopped.
const readerIdle = time.Second

// prunePeriod is how often the count of active readers drops those
// idle for readerIdle: a pass over all readers at each sequential read
// would cost time linear in the readers (85 us per read at 10000 readers,
// under one lock), and a reader counted up to this much longer changes
// little.
const prunePeriod = readerIdle / 8

// readerSeen records that r (nil: none) has just read and counts the
// active readers again, dropping the idle ones when the last pass over
// them is older than prunePeriod, or when prune is set.
func (c *Cache) readerSeen(r *Reader, prune bool) {
	c.pf.mu.Lock()
	window := c.pf.window // the memory budget
	c.pf.mu.Unlock()
	now := time.Now().UnixNano()
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if r != nil {
		r.seen.Store(now)
		c.readers[r] = struct{}{}
	}
	if prune || now-c.pruned > int64(prunePeriod) {
		for x := range c.readers {
			if now-x.seen.Load() > int64(readerIdle) {
				delete(c.readers, x)
			}
		}
		c.pruned = now
		c.prunes++
	}
	n := int64(len(c.readers))
	c.active.Store(n)
	c.crowded.Store(n*2*c.cfg.ChunkBytes > window)
	c.counted.Store(now)
}

// isCrowded reports whether the cache is crowded, counting the readers
// again when the last count is older than readerIdle: a crowd whose
// readers all stopped (no sequential read since) no longer crowds the
// loads of the readers that remain.
func (c *Cache) isCrowded() bool {
	if !c.crowded.Load() {
		return false
	}
	if time.Now().UnixNano()-c.counted.Load() > int64(readerIdle) {
		c.readerSeen(nil, true)
	}
	return c.crowded.Load()
}

// ReaderDone says that r reads no more (its reader reached the end of
// the log): it stops counting as active at once.
func (c *Cache) ReaderDone(r *Reader) {
	c.rmu.Lock()
	delete(c.readers, r)
	c.rmu.Unlock()
	c.readerSeen(nil, false)
}

// Crowded reports whether more sequential readers are active than the
// memory budget holds two chunks for, and how many are active (at the
// last count, taken again when it is older than readerIdle and showed a
// crowd).
func (c *Cache) Crowded() (crowded bool, active int) {
	return c.isCrowded(), int(c.active.Load())
}
