package cache

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// With no more active sequential Readers than the memory budget holds two
// chunks for, a reader going on through a chunk grows its cached part to
// the whole chunk and prefetch starts; with more, the cache is crowded:
// each load takes the bytes asked for (at least minLoad), so the memory
// tier holds about minLoad of the chunk, and prefetch is skipped with
// reason "crowded". ReaderDone ends the crowd at once.
func TestCrowdedReadersLoadParts(t *testing.T) {
	const cb = 64 << 10 // minLoad 16 KiB
	s := newStore(16 * cb)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, MaxInflightGets: 8, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readChunk := func(i int64) int64 { // sequential 4 KiB reads through chunk i; the memory tier's part after
		for off := int64(0); off < cb; off += 4 << 10 {
			view(t, c, o, s, i*cb+off, 4<<10)
		}
		sl, ok := c.mem.acquire(key(o.Key, i), false)
		if !ok {
			t.Fatalf("chunk %d not in the memory tier", i)
		}
		defer c.unref(sl)
		return sl.to - sl.from
	}
	var readers []*Reader
	for range 4 { // 4 x 2 x 64 KiB: what the budget holds
		readers = append(readers, c.NewReader())
	}
	if crowded, n := c.Crowded(); crowded || n != 4 {
		t.Fatalf("4 readers, 8 chunks of memory: crowded %v, %d active; want not crowded, 4", crowded, n)
	}
	if n := readChunk(0); n != cb {
		t.Fatalf("not crowded: the cached part grew to %d bytes, want the whole chunk (%d)", n, cb)
	}
	if got := c.PrefetchFor(o, 8, readers[0]); got != PrefetchStarted {
		t.Fatalf("not crowded: prefetch %v, want started", got)
	}
	c.Settle()
	readers = append(readers, c.NewReader())
	if crowded, n := c.Crowded(); !crowded || n != 5 {
		t.Fatalf("5 readers, 8 chunks of memory: crowded %v, %d active; want crowded, 5", crowded, n)
	}
	before := s.bytes.Load()
	if n := readChunk(1); n > c.minLoad() {
		t.Fatalf("crowded: the cached part is %d bytes, want at most a load of minLoad (%d)", n, c.minLoad())
	}
	if got := s.bytes.Load() - before; got != cb {
		t.Fatalf("crowded: reading a chunk fetched %d bytes, want the chunk's %d", got, cb)
	}
	if got := c.PrefetchFor(o, 9, readers[0]); got != PrefetchSkipped {
		t.Fatalf("crowded: prefetch %v, want skipped", got)
	}
	if n := testutil.ToFloat64(c.m.prefetchSkipped.WithLabelValues("crowded")); n != 1 {
		t.Fatalf("%v prefetches skipped as crowded, want 1", n)
	}
	c.ReaderDone(readers[4])
	if crowded, n := c.Crowded(); crowded || n != 4 {
		t.Fatalf("after ReaderDone: crowded %v, %d active; want not crowded, 4", crowded, n)
	}
}
