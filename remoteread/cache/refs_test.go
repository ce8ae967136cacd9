package cache

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// seededStore is a store whose bytes differ from newStore's (and from
// another seed's), so that a buffer reused for another chunk shows.
func seededStore(n int, seed byte) *store {
	s := newStore(n)
	for i := range s.data {
		s.data[i] ^= seed
	}
	return s
}

// A Pin's views and a Read's copy keep their bytes while the pinned
// chunks are evicted and their buffers would be reused: other objects'
// chunks (different bytes) are loaded into pooled buffers all the while.
// After Release the buffers go back to the pool and are reused, and
// Pinned counts no Pin. Run with -race: a buffer reused under a view is
// also a data race on it.
func TestPinnedBuffersNotReused(t *testing.T) {
	const cb = 4096
	a := seededStore(8*cb, 0)
	b := seededStore(32*cb, 0x5a)
	oa, ob := a.object("a"), b.object("b")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 4 * cb, MaxInflightGets: 2, LoadTimeout: 5 * time.Second}, nil)
	c.pool.live = map[*byte]bool{}
	ctx := context.Background()

	var pins []*Pin
	var views [][]byte
	var want [][]byte
	for i := int64(0); i < 4; i++ { // whole chunks: pooled buffers
		p := c.Pin(oa, i*cb, cb)
		parts, err := p.Slices(ctx, i*cb, cb, nil)
		if err != nil || len(parts) != 1 {
			t.Fatalf("slices of chunk %d: %v (%d parts)", i, err, len(parts))
		}
		pins, views, want = append(pins, p), append(views, parts[0]), append(want, a.data[i*cb:(i+1)*cb])
	}
	if got := c.Pinned(); got != 4 {
		t.Fatalf("Pinned %d, want 4", got)
	}
	copied, err := c.Read(ctx, oa, 4*cb+100, 2*cb, nil) // spans chunks 4-6
	if err != nil || !bytes.Equal(copied, a.data[4*cb+100:6*cb+100]) {
		t.Fatalf("read: %v", err)
	}
	churn := func() {
		for i := int64(0); i < 32; i++ {
			view := make([]byte, 0, cb)
			v, err := c.Read(ctx, ob, i*cb, cb, view)
			if err != nil || !bytes.Equal(v, b.data[i*cb:(i+1)*cb]) {
				t.Fatalf("churn chunk %d: %v", i, err)
			}
		}
		c.Settle()
	}
	churn()
	for i, v := range views {
		if c.mem.has(key("a", int64(i))) {
			t.Fatalf("pinned chunk %d still in the memory tier: the test does not evict it", i)
		}
		if !bytes.Equal(v, want[i]) {
			t.Fatalf("pinned view of chunk %d changed after eviction", i)
		}
	}
	if !bytes.Equal(copied, a.data[4*cb+100:6*cb+100]) {
		t.Fatal("a Read's copy changed")
	}
	reusedBefore := c.pool.reused.Load()
	for _, p := range pins {
		p.Release()
		p.Release() // idempotent
	}
	if got := c.Pinned(); got != 0 {
		t.Fatalf("Pinned %d after Release, want 0", got)
	}
	churn()
	if c.pool.reused.Load() <= reusedBefore {
		t.Fatal("no buffer reused after the pins were released")
	}
	// A Pin's View after Release is a copy, right whatever the buffers
	// hold now.
	if v, err := pins[0].View(ctx, 10, 100); err != nil || !bytes.Equal(v, a.data[10:110]) {
		t.Fatalf("view after Release: %v", err)
	}
}

// Cache.View's single-chunk answer shares the chunk: its buffer is never
// pooled (escaped), so the answer keeps its bytes through any churn.
func TestViewEscapes(t *testing.T) {
	const cb = 4096
	a, b := seededStore(2*cb, 0), seededStore(16*cb, 0x33)
	oa, ob := a.object("a"), b.object("b")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 2 * cb, MaxInflightGets: 2, LoadTimeout: 5 * time.Second}, nil)
	c.pool.live = map[*byte]bool{}
	v, err := c.View(context.Background(), oa, 0, cb)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 16; i++ {
		view(t, c, ob, b, i*cb, cb)
	}
	c.Settle()
	if !bytes.Equal(v, a.data[:cb]) {
		t.Fatal("an escaped view changed")
	}
}

// SetBudgets keeps the prefetch budget in force at
// min(remote.fetch.prefetch.budget.bytes, half the memory budget), and
// shrinking evicts in the memory tier's order: read chunks first, unread
// prefetched ones last.
func TestSetBudgetsPrefetchLimit(t *testing.T) {
	const cb = 4096
	s := newStore(64 * cb)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 16 * cb, MaxInflightGets: 8, PrefetchBudgetBytes: 6 * cb, LoadTimeout: 5 * time.Second}, nil)
	limit := func() int64 {
		c.pf.mu.Lock()
		defer c.pf.mu.Unlock()
		return c.pf.limit
	}
	if l := limit(); l != 6*cb {
		t.Fatalf("limit %d, want the configured 6 chunks", l)
	}
	// Two unread prefetches, then read chunks filling the rest.
	for i := int64(0); i < 2; i++ {
		if c.Prefetch(o, i) != PrefetchStarted {
			t.Fatalf("prefetch %d not started", i)
		}
		c.Settle()
	}
	for i := int64(10); i < 24; i++ {
		view(t, c, o, s, i*cb, cb)
	}
	c.Settle()
	if err := c.SetBudgets(8*cb, 0); err != nil {
		t.Fatal(err)
	}
	if l := limit(); l != 4*cb {
		t.Fatalf("limit %d after shrinking memory to 8 chunks, want half of it", l)
	}
	for i := int64(0); i < 2; i++ {
		if !c.mem.has(key("obj", i)) {
			t.Fatalf("unread prefetched chunk %d evicted by the smaller budget before read chunks", i)
		}
	}
	if c.mem.has(key("obj", 10)) {
		t.Fatal("least recently used read chunk kept")
	}
	// The new limit holds: prefetches are admitted up to it, then
	// refused (the two old ones expire meanwhile: the cache loaded more
	// than the new memory budget since).
	i := int64(30)
	for ; c.Prefetch(o, i) == PrefetchStarted; i++ {
		c.Settle()
	}
	if now, most := c.PrefetchHeld(); now != 4*cb || i == 30 {
		t.Fatalf("prefetch budget holds %d bytes (most %d) after %d admitted, want the new limit %d", now, most, i-30, 4*cb)
	}
	if err := c.SetBudgets(64*cb, 0); err != nil {
		t.Fatal(err)
	}
	if l := limit(); l != 6*cb {
		t.Fatalf("limit %d after growing memory, want the configured 6 chunks", l)
	}
}

// A part's buffer (a cold read inside a chunk loads only its part) goes
// back to the pool when its last holder lets go, and a later part load of
// a size in the same step reuses it, with the new part's bytes only.
func TestPartBuffersReused(t *testing.T) {
	const cb = 64 << 10
	a, b := seededStore(4*cb, 0), seededStore(4*cb, 0x77)
	oa, ob := a.object("a"), b.object("b")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 4 * cb, MaxInflightGets: 2, LoadTimeout: 5 * time.Second}, nil)
	c.pool.live = map[*byte]bool{}
	ctx := context.Background()
	read := func(o Object, data []byte, off, n int64) {
		t.Helper()
		p := c.Pin(o, off, n)
		defer p.Release()
		parts, err := p.Slices(ctx, off, n, nil)
		if err != nil || len(parts) != 1 || !bytes.Equal(parts[0], data[off:off+n]) {
			t.Fatalf("%s bytes %d-%d: %v (%d parts)", o.Key, off, off+n, err, len(parts))
		}
	}
	before := c.pool.reused.Load()
	for round := int64(0); round < 20; round++ {
		off := round % 3 * cb
		read(oa, a.data, off+5000, 20000) // a part of 20000 bytes or more
		read(ob, b.data, off+9000, 20500) // the same step of 4096 bytes
		c.Drop()
	}
	// sync.Pool drops some buffers at random under -race (and all of them
	// after two collections): some reuse, not all, is asserted.
	if c.pool.reused.Load() == before {
		t.Fatal("no part buffer reused")
	}
}
