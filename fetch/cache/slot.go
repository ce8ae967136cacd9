package cache

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// slot holds a chunk's bytes [from, to) (chunk-relative): loaded (done)
// or still arriving. Bytes below n never change once written, so readers
// may keep slices of them.
type slot struct {
	from, to int64
	pins     atomic.Int32 // Pins holding the slot (pin.go)

	mu   sync.Mutex
	buf  []byte // len: the whole suffix; filled up to n
	n    int
	done bool
	err  error
	wake chan struct{} // closed, and replaced, whenever n or done changes
}

func doneSlot(from int64, data []byte) *slot {
	return &slot{from: from, to: from + int64(len(data)), buf: data, n: len(data), done: true}
}

// covers reports whether the slot holds (or will) bytes [a, b).
func (s *slot) covers(a, b int64) bool { return s.from <= a && b <= s.to }

// progress records n bytes filled and wakes waiters.
func (s *slot) progress(n int) {
	s.mu.Lock()
	s.n = n
	close(s.wake)
	s.wake = make(chan struct{})
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
	close(s.wake)
	s.wake = nil
	s.mu.Unlock()
}

// wait returns chunk-relative bytes [a, b) once they have arrived.
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
type lru struct {
	mu       sync.Mutex
	budget   int64
	size     int64
	reserved int64      // bytes of loads in flight, which the budget covers too
	room     *sync.Cond // signalled when reserved bytes are released
	ll       *list.List
	items    map[chunkKey]*list.Element
}

type entry struct {
	key chunkKey
	s   *slot
}

func newLRU(budget int64) *lru {
	l := &lru{budget: budget, ll: list.New(), items: map[chunkKey]*list.Element{}}
	l.room = sync.NewCond(&l.mu)
	return l
}

func (l *lru) get(k chunkKey) (*slot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		l.ll.MoveToFront(e)
		return e.Value.(*entry).s, true
	}
	return nil, false
}

func (l *lru) peek(k chunkKey) (*slot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		return e.Value.(*entry).s, true
	}
	return nil, false
}

// put adds or replaces an entry, evicting the least recently used ones
// over budget. A slot larger than the budget is not kept.
func (l *lru) put(k chunkKey, s *slot) {
	size := int64(len(s.buf))
	l.mu.Lock()
	defer l.mu.Unlock()
	if size > l.budget {
		return
	}
	if e, ok := l.items[k]; ok {
		l.size -= int64(len(e.Value.(*entry).s.buf))
		e.Value.(*entry).s = s
		l.ll.MoveToFront(e)
	} else {
		l.items[k] = l.ll.PushFront(&entry{key: k, s: s})
	}
	l.size += size
	l.evict()
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

func (l *lru) release(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved -= n
	l.room.Broadcast()
}

func (l *lru) evict() {
	for l.size+l.reserved > l.budget && l.ll.Len() > 0 {
		last := l.ll.Back()
		e := last.Value.(*entry)
		l.ll.Remove(last)
		delete(l.items, e.key)
		l.size -= int64(len(e.s.buf))
	}
}

func (l *lru) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ll.Init()
	l.items = map[chunkKey]*list.Element{}
	l.size = 0
}
