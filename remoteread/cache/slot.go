package cache

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// slot holds a chunk's bytes [from, to) (chunk-relative): loaded (done)
// or still arriving. Bytes below n never change once written, so readers
// may keep slices of them while they hold a reference (or forever, once
// the slot has escaped).
//
// References (refs) are held by the cache (from the claim until the slot
// leaves the memory tier, or is not put there), by the load filling it
// (until its disk write ends), and by each Pin and View using it. When the
// last one goes and no slice escaped to a caller that cannot give it back
// (escaped), a pooled buffer goes back to the pool for the next load.
type slot struct {
	from, to int64

	mu   sync.Mutex
	buf  []byte // len: the whole part; filled up to n
	n    int
	done bool
	err  error
	wake chan struct{} // made by a waiter; closed and cleared when n reaches need, or done
	need int           // the fewest filled bytes a waiter on wake waits for

	refs    atomic.Int32
	escaped atomic.Bool // a slice of buf went out with no release
	pooled  bool        // buf is the pool's (set by the load before it fills)
	// pf is set while the slot is a prefetch not yet read by a demand
	// read: its bytes count in the shared prefetch budget, and eviction
	// takes it last. pfSeq is the cache's loaded-bytes count when it was
	// admitted (it expires once the cache has loaded its memory budget
	// since).
	pf    atomic.Bool
	pfSeq int64
	owner *Reader // the reader the prefetch was made for; nil: none
	// pre, when set, is the chunk's cached part this load extends: bytes
	// [pre.from, pre.to) are copied from it (the load holds a reference
	// until then), the rest comes from the store.
	pre *slot
	// base, when set, is the part this one grows in place: its buffer is
	// base's, which left room past base's bytes (see Cache.extend); the
	// slot holds a reference to base for as long as it lives, so that the
	// buffer goes back to the pool only once neither is used.
	base *slot
	// room is the capacity the load gives the slot's buffer (at least its
	// length), so that a later part of the chunk may grow in place; 0:
	// its length. grown (guarded by Cache.mu) says a part growing in
	// place has taken that room: another may not, as a reader may hold
	// bytes that part wrote there.
	room  int64
	grown bool
	// reserved is what the load took of the memory budget (a new buffer's
	// capacity; nothing for a part growing in place).
	reserved int64
	// newer is set for a load made while the cache was crowded
	// (crowd.go): it takes the chunk's place in the memory tier even from
	// a larger part, as its reader reads on from it.
	newer bool
}

// preLen is the bytes of the slot copied from a cached part, or already
// in the buffer it grows in place, not loaded.
func (s *slot) preLen() int64 {
	switch {
	case s.pre != nil:
		return s.pre.to - s.pre.from
	case s.base != nil:
		return s.base.to - s.base.from
	}
	return 0
}

// memBytes is the memory the slot's buffer takes: its capacity (a part
// grown in place counts the buffer it shares, which its base no longer
// does once the part replaced it in the memory tier).
func (s *slot) memBytes() int64 { return int64(cap(s.buf)) }

// newSlot returns a slot for a load of [from, to), holding refs
// references.
func newSlot(from, to int64, refs int32) *slot {
	s := &slot{from: from, to: to}
	s.refs.Store(refs)
	return s
}

func doneSlot(from int64, data []byte) *slot {
	data = data[:len(data):len(data)] // a file's bytes: no room counted past them
	s := &slot{from: from, to: from + int64(len(data)), buf: data, n: len(data), done: true}
	s.refs.Store(1) // the cache's
	return s
}

// ref takes a reference unless the slot has none left (its buffer may be
// back in the pool); it reports whether it took one.
func (s *slot) ref() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// isDone reports whether the slot's load has ended.
func (s *slot) isDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// covers reports whether the slot holds (or will) bytes [a, b).
func (s *slot) covers(a, b int64) bool { return s.from <= a && b <= s.to }

// progress records n bytes filled and wakes the waiters once the bytes
// one of them waits for are in: a load announces every read of its GET
// body (often a few KiB on a socket), and a waiter for bytes further on
// is not woken, only to sleep again, by each.
func (s *slot) progress(n int) {
	s.mu.Lock()
	s.n = n
	if s.wake != nil && n >= s.need {
		close(s.wake)
		s.wake = nil
	}
	s.mu.Unlock()
}

// end marks the load finished (err nil: every byte is in) and wakes
// waiters.
func (s *slot) end(err error) {
	s.mu.Lock()
	s.done, s.err = true, err
	if err == nil {
		s.n = len(s.buf)
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	s.mu.Unlock()
}

// wait returns chunk-relative bytes [a, b) once they have arrived. The
// caller holds a reference.
func (s *slot) wait(ctx context.Context, a, b int64) ([]byte, error) {
	for {
		s.mu.Lock()
		if int64(s.n) >= b-s.from {
			v := s.buf[a-s.from : b-s.from]
			s.mu.Unlock()
			return v, nil
		}
		if s.done {
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		if need := int(b - s.from); s.wake == nil {
			s.wake, s.need = make(chan struct{}), need
		} else {
			s.need = min(s.need, need)
		}
		w := s.wake
		s.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lru is the memory tier: whole loaded slots, LRU within a byte budget.
// Unread prefetches (slot.pf) are evicted only when nothing else is left.
type lru struct {
	mu       sync.Mutex
	budget   int64
	size     int64
	reserved int64      // bytes of loads in flight, which the budget covers too
	room     *sync.Cond // signalled when reserved bytes are released
	ll       *list.List
	items    map[chunkKey]*list.Element
	drop     func(*slot) // called under mu for each slot leaving the tier
}

type entry struct {
	key chunkKey
	s   *slot
}

func newLRU(budget int64, drop func(*slot)) *lru {
	l := &lru{budget: budget, ll: list.New(), items: map[chunkKey]*list.Element{}, drop: drop}
	l.room = sync.NewCond(&l.mu)
	return l
}

// acquire returns k's slot with a reference taken for the caller, moved
// to the front when touch is set.
func (l *lru) acquire(k chunkKey, touch bool) (*slot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.items[k]
	if !ok {
		return nil, false
	}
	if touch {
		l.ll.MoveToFront(e)
	}
	s := e.Value.(*entry).s
	return s, s.ref() // the tier's own reference keeps refs above 0
}

// has reports whether the tier holds some part of k.
func (l *lru) has(k chunkKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.items[k]
	return ok
}

// put adds s as k's entry unless the tier holds a larger part of the
// chunk, evicting over budget; a slot larger than the budget is not kept.
// It reports whether it took s (and the cache's reference to it).
func (l *lru) put(k chunkKey, s *slot) bool {
	size := s.memBytes()
	l.mu.Lock()
	defer l.mu.Unlock()
	if size > l.budget {
		return false
	}
	if e, ok := l.items[k]; ok {
		old := e.Value.(*entry).s
		if len(old.buf) > len(s.buf) && !s.newer {
			return false
		}
		l.size -= old.memBytes()
		e.Value.(*entry).s = s
		l.ll.MoveToFront(e)
		l.drop(old)
	} else {
		l.items[k] = l.ll.PushFront(&entry{key: k, s: s})
	}
	l.size += size
	l.evict()
	return true
}

// reserve counts n bytes of a load in flight against the budget, evicting
// to make room; release gives them back when the load ends (before its
// slot is put).
//
// A load waits while the loads already in flight leave no room for it,
// so that together they stay within the budget; one load alone may
// always start (one larger than the budget too), so loads make progress.
func (l *lru) reserve(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() { // wake the wait below
		l.mu.Lock()
		l.room.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.reserved > 0 && l.reserved+n > l.budget {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.room.Wait()
	}
	l.reserved += n
	l.evict()
	return nil
}

// tryReserve is reserve for a prefetch: it never waits, and takes the
// bytes only when the loads in flight, the unread prefetched bytes
// (unread) and n fit the budget together, so that a prefetch never evicts
// another one and leaves demand loads their room.
func (l *lru) tryReserve(n, unread int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserved+unread+n > l.budget {
		return false
	}
	l.reserved += n
	l.evict()
	return true
}

func (l *lru) release(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved -= n
	l.room.Broadcast()
}

// evict removes entries while the tier and the loads in flight exceed
// the budget: the least recently used that is not an unread prefetch
// first, unread prefetches only when nothing else is left.
func (l *lru) evict() {
	for l.size+l.reserved > l.budget && l.ll.Len() > 0 {
		victim := l.ll.Back()
		for e := victim; e != nil; e = e.Prev() {
			if !e.Value.(*entry).s.pf.Load() {
				victim = e
				break
			}
		}
		e := victim.Value.(*entry)
		l.ll.Remove(victim)
		delete(l.items, e.key)
		l.size -= e.s.memBytes()
		l.drop(e.s)
	}
}

func (l *lru) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for e := l.ll.Front(); e != nil; e = e.Next() {
		l.drop(e.Value.(*entry).s)
	}
	l.ll.Init()
	l.items = map[chunkKey]*list.Element{}
	l.size = 0
}
