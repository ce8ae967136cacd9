package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// PrefetchOutcome is what Prefetch did.
type PrefetchOutcome int

const (
	// PrefetchStarted: a load of the chunk started.
	PrefetchStarted PrefetchOutcome = iota
	// PrefetchPresent: the chunk (or the part a reader reads next) is
	// cached or loading already, or lies outside the object.
	PrefetchPresent
	// PrefetchSkipped: admission control refused the load (the shared
	// prefetch budget, the GET slots or the memory budget had no room);
	// nothing is queued.
	PrefetchSkipped
)

// pfBudget is the prefetch budget all readers share: the bytes of
// prefetch loads in flight plus the prefetched bytes no demand read has
// used yet. A prefetched chunk leaves it when a demand read first uses
// it, when the memory tier evicts it, when its load fails, or when it
// expires: unread while the cache loaded a memory budget's worth of other
// bytes since it was admitted or, for a prefetch made for a Reader, since
// that reader last read (Cache.Active): its reader has most likely moved
// away. A reader that goes on reading keeps its prefetches however many
// other readers load meanwhile.
type pfBudget struct {
	mu     sync.Mutex
	limit  int64 // min(PrefetchBudgetBytes, memory budget / 2); SetBudgets changes it
	window int64 // the memory budget: unread prefetches expire after the cache loaded this much
	bytes  int64
	max    int64      // high-water mark of bytes, for tests
	fifo   *list.List // of *slot, in admission order; entries already out are skipped
}

// pfLimits sets the prefetch budget in force from the configured one and
// the memory budget: at most half of it, so that demand reads keep the
// other half.
func (c *Cache) pfLimits(memoryBytes int64) {
	c.pf.mu.Lock()
	c.pf.limit = min(c.cfg.PrefetchBudgetBytes, memoryBytes/2)
	c.pf.window = memoryBytes
	c.pf.mu.Unlock()
}

// pfAdmit takes n bytes of the prefetch budget, first expiring stale
// prefetches; it reports false (and takes nothing) when they do not fit.
// It returns the bytes held before it (for the memory check).
func (c *Cache) pfAdmit(n int64) (before int64, ok bool) {
	b := &c.pf
	b.mu.Lock()
	defer b.mu.Unlock()
	c.pfExpireLocked()
	if b.bytes+n > b.limit {
		return b.bytes, false
	}
	before = b.bytes
	b.bytes += n
	b.max = max(b.max, b.bytes)
	return before, true
}

// pfExpire expires stale prefetches (see pfBudget) and drops the entries
// already out of the budget from the admission list.
func (c *Cache) pfExpire() {
	c.pf.mu.Lock()
	defer c.pf.mu.Unlock()
	c.pfExpireLocked()
}

// pfExpireLocked is pfExpire with c.pf.mu held.
func (c *Cache) pfExpireLocked() {
	b := &c.pf
	seq := c.loaded.Load()
	for e := b.fifo.Front(); e != nil; {
		s, next := e.Value.(*slot), e.Next()
		if s.pf.Load() {
			last := s.pfSeq
			if s.owner != nil {
				last = max(last, s.owner.last.Load())
			}
			if seq-last <= b.window {
				if s.owner == nil {
					break // admitted in order: the later ones are younger
				}
				e = next
				continue
			}
			if s.pf.CompareAndSwap(true, false) {
				b.bytes -= s.to - s.from
				c.m.prefetchWasted.WithLabelValues("expired").Add(float64(s.to - s.from))
			}
		}
		b.fifo.Remove(e)
		e = next
	}
}

// pfUnadmit gives back n bytes pfAdmit took for a load that did not
// start.
func (c *Cache) pfUnadmit(n int64) {
	c.pf.mu.Lock()
	c.pf.bytes -= n
	c.pf.mu.Unlock()
}

// Reader stands for one sequential reader whose prefetches stay
// unexpired while it keeps reading (see pfBudget); fetch makes one per
// chain of sequential fetches. The zero value is not ready: use
// Cache.NewReader.
type Reader struct {
	last atomic.Int64 // the cache's loaded-bytes count at its last read
	seen atomic.Int64 // when it last read, Unix ns (crowd.go)
}

// NewReader returns a Reader that has just read; it counts as an active
// sequential reader (see crowd.go).
func (c *Cache) NewReader() *Reader {
	r := &Reader{}
	r.last.Store(c.loaded.Load())
	c.readerSeen(r, false)
	return r
}

// Active records that r has just read (a sequential fetch): its unread
// prefetches expire only once the cache has loaded a memory budget's
// worth of bytes after this, and it counts as an active sequential
// reader until then.
func (c *Cache) Active(r *Reader) {
	r.last.Store(c.loaded.Load())
	c.readerSeen(r, false)
}

// pfTrack makes s a prefetch counted in the budget (its bytes were
// admitted).
func (c *Cache) pfTrack(s *slot) {
	s.pfSeq = c.loaded.Load()
	s.pf.Store(true)
	c.pf.mu.Lock()
	c.pf.fifo.PushBack(s)
	c.pf.mu.Unlock()
}

// pfDone takes s out of the prefetch budget if it is still in: outcome
// "read" when a demand read used it, "extended" when a prefetch of a
// longer part copied it (the new part counts its bytes), else why its
// bytes were wasted ("evicted", "failed").
func (c *Cache) pfDone(s *slot, outcome string) {
	if !s.pf.Load() || !s.pf.CompareAndSwap(true, false) {
		return
	}
	n := s.to - s.from
	c.pf.mu.Lock()
	c.pf.bytes -= n
	c.pf.mu.Unlock()
	if outcome != "read" && outcome != "extended" {
		c.m.prefetchWasted.WithLabelValues(outcome).Add(float64(n))
	}
}

// used records a demand read's use of s (the caller holds a reference).
func (c *Cache) used(s *slot) { c.pfDone(s, "read") }

// PrefetchHeld returns the bytes the shared prefetch budget holds now and
// the most it has held (in flight plus prefetched and unread).
func (c *Cache) PrefetchHeld() (now, most int64) {
	c.pf.mu.Lock()
	defer c.pf.mu.Unlock()
	return c.pf.bytes, c.pf.max
}
