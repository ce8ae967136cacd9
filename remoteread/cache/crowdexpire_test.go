package cache

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Prefetches whose reader stopped expire while the cache is crowded as
// they do when it is not (a memory budget's worth of loads after their
// reader's last read): a sequential reader's prefetch attempt, skipped as
// crowded, still expires them, so that they leave the shared budget and
// are no longer kept in the memory tier ahead of the crowded readers'
// parts until the crowd ends.
func TestStalePrefetchExpiresWhileCrowded(t *testing.T) {
	const cb = 64 << 10 // minLoad 16 KiB
	s := newStore(64 * cb)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, MaxInflightGets: 8, PrefetchBudgetBytes: 4 * cb, LoadTimeout: 5 * time.Second}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gone := c.NewReader()
	for i := int64(0); i < 4; i++ {
		if got := c.PrefetchFor(o, i, gone); got != PrefetchStarted {
			t.Fatalf("prefetch %d: %v", i, got)
		}
		c.Settle()
	}
	c.ReaderDone(gone) // it reads no more
	var crowd []*Reader
	for range 5 { // 5 x 2 chunks > 8 chunks of memory
		crowd = append(crowd, c.NewReader())
	}
	if crowded, _ := c.Crowded(); !crowded {
		t.Fatal("5 readers, 8 chunks of memory: not crowded")
	}
	// The crowd reads n chunks elsewhere in 16 KiB steps (a part of
	// minLoad each), trying to read ahead after each read.
	readOn := func(from, n int64) {
		for off := from * cb; off < (from+n)*cb; off += 16 << 10 {
			view(t, c, o, s, off, 16<<10)
			for _, r := range crowd { // all five read on
				c.Active(r)
			}
			if got := c.PrefetchFor(o, off/cb+1, crowd[0]); got != PrefetchSkipped {
				t.Fatalf("crowded: prefetch %v", got)
			}
		}
	}
	readOn(16, 12) // loads 12 chunks' bytes, more than the memory budget
	if held, _ := c.PrefetchHeld(); held != 0 {
		t.Fatalf("crowded: the stopped reader's unread prefetches hold %d bytes of the budget after a memory budget's worth of loads, want 0 (expired)", held)
	}
	if w := testutilWasted(c, "expired"); w != 4*cb {
		t.Fatalf("%v bytes expired, want %d", w, 4*cb)
	}
	readOn(28, 24) // 24 parts more: the tier is over its budget by more than the 4 chunks
	for i := int64(0); i < 4; i++ {
		if c.mem.has(key(o.Key, i)) {
			t.Fatalf("expired prefetch of chunk %d still in the memory tier, kept ahead of the crowd's parts", i)
		}
	}
}
