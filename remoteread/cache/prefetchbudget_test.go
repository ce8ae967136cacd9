package cache

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Many sequential readers, each prefetching far ahead of itself, never
// make the shared prefetch budget hold more than its limit (the
// high-water mark, not a sample), and some prefetches are refused by it.
func TestPrefetchBudgetShared(t *testing.T) {
	const cb = 4096
	s := newStore(256 * cb)
	o := s.object("obj")
	reg := prometheus.NewRegistry()
	// GET slots to spare, so that the budget is what refuses prefetches.
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 64 * cb, MaxInflightGets: 64, PrefetchBudgetBytes: 8 * cb, LoadTimeout: 5 * time.Second}, reg)
	var wg sync.WaitGroup
	for r := 0; r < 32; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			first := int64(r * 8)
			for i := first; i < first+8; i++ {
				for j := i + 1; j < i+16; j++ { // 15 chunks ahead: far more than the budget
					c.Prefetch(o, j)
				}
				v, err := c.View(context.Background(), o, i*cb, cb)
				if err != nil || !bytes.Equal(v, s.data[i*cb:(i+1)*cb]) {
					t.Errorf("reader %d chunk %d: %v", r, i, err)
					return
				}
			}
		}(r)
	}
	wg.Wait()
	c.Settle()
	_, most := c.PrefetchHeld()
	if most > 8*cb {
		t.Fatalf("prefetch budget held up to %d bytes, limit %d", most, 8*cb)
	}
	if most == 0 {
		t.Fatal("no prefetch was admitted")
	}
	if n := testutil.ToFloat64(c.m.prefetchSkipped.WithLabelValues("budget")); n == 0 {
		t.Fatal("no prefetch was refused for the budget; the test does not load it")
	}
}

// gatedObject is an object whose every body is held until gate closes.
func gatedObject(s *store, k string, gate chan struct{}) Object {
	o := s.object(k)
	o.Open = func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		s.gets.Add(1)
		s.bytes.Add(end - start)
		return io.NopCloser(&gatedReader{r: bytes.NewReader(s.data[start:end]), gate: gate}), nil
	}
	return o
}

// With prefetch saturated (its loads hung, the budget full, GET slots
// taken), a demand read still gets a GET slot and memory and completes;
// prefetches are skipped, not queued.
func TestDemandNotStarvedByPrefetch(t *testing.T) {
	const cb = 4096
	s := newStore(64 * cb)
	gate := make(chan struct{})
	defer close(gate)
	hung := gatedObject(s, "hung", gate)
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 16 * cb, MaxInflightGets: 3, PrefetchBudgetBytes: 64 * cb, LoadTimeout: time.Minute}, nil)
	started, skipped := 0, 0
	for i := int64(0); i < 64; i++ {
		switch c.Prefetch(hung, i) {
		case PrefetchStarted:
			started++
		case PrefetchSkipped:
			skipped++
		}
	}
	if started != 2 || skipped != 62 {
		t.Fatalf("%d prefetches started, %d skipped; want 2 (GET slots less one) and the rest skipped", started, skipped)
	}
	// A deadline only so that a starved read fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := s.object("demand")
	for i := int64(0); i < 32; i++ { // twice the memory budget
		v, err := c.View(ctx, o, i*cb, cb)
		if err != nil || !bytes.Equal(v, s.data[i*cb:(i+1)*cb]) {
			t.Fatalf("demand read of chunk %d with prefetch saturated: %v", i, err)
		}
	}
}

// Unread prefetched chunks are evicted last, and only when a demand load
// needs their room (the memory budget holds); they then leave the
// prefetch budget as wasted.
func TestUnreadPrefetchEvictedLast(t *testing.T) {
	const cb = 4096
	s := newStore(64 * cb)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, MaxInflightGets: 4, PrefetchBudgetBytes: 4 * cb, LoadTimeout: 5 * time.Second}, nil)
	for i := int64(0); i < 4; i++ {
		for c.Prefetch(o, i) == PrefetchSkipped { // GET slots busy: wait for the others
			c.Settle()
		}
	}
	c.Settle()
	for i := int64(10); i < 14; i++ { // fills the other half
		view(t, c, o, s, i*cb, cb)
	}
	view(t, c, o, s, 20*cb, cb) // evicts chunk 10, not a prefetched one
	c.Settle()
	for i := int64(0); i < 4; i++ {
		if !c.mem.has(key("obj", i)) {
			t.Fatalf("unread prefetched chunk %d evicted before read chunks", i)
		}
	}
	if c.mem.has(key("obj", 10)) {
		t.Fatal("least recently used read chunk 10 still cached")
	}
	for i := int64(30); i < 36; i++ { // one at a time: read chunks make room
		view(t, c, o, s, i*cb, cb)
	}
	if now, _ := c.PrefetchHeld(); now != 4*cb {
		t.Fatalf("prefetch budget holds %d bytes, want the 4 unread chunks", now)
	}
	view(t, c, o, s, 40*cb, 7*cb) // one load of 7 chunks needs 3 of theirs
	if now, _ := c.PrefetchHeld(); now != cb {
		t.Fatalf("prefetch budget holds %d bytes after 3 of its 4 chunks were evicted", now)
	}
	if w := testutilWasted(c, "evicted"); w != 3*cb {
		t.Fatalf("%v prefetched bytes counted as evicted unread, want %d", w, 3*cb)
	}
}

func testutilWasted(c *Cache, reason string) float64 {
	return testutil.ToFloat64(c.m.prefetchWasted.WithLabelValues(reason))
}

// A prefetch no one reads expires once the cache has loaded a memory
// budget's worth of other bytes, so a reader that moved away does not
// hold the shared budget.
func TestUnreadPrefetchExpires(t *testing.T) {
	const cb = 4096
	s := newStore(64 * cb)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, MaxInflightGets: 4, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, nil)
	c.Prefetch(o, 0)
	c.Settle()
	c.Prefetch(o, 1)
	c.Settle()
	if c.Prefetch(o, 2) != PrefetchSkipped {
		t.Fatal("prefetch past the budget not skipped")
	}
	// Demand loads of 8 chunks (the memory budget) elsewhere; the old
	// prefetches stay cached as read chunks are evicted around them.
	for i := int64(0); i < 4; i++ {
		view(t, c, o, s, (20+i)*cb, cb)
	}
	if c.Prefetch(o, 2) != PrefetchSkipped {
		t.Fatal("prefetch admitted before the unread ones expired")
	}
	for i := int64(4); i < 9; i++ {
		view(t, c, o, s, (20+i)*cb, cb)
	}
	if c.Prefetch(o, 2) != PrefetchStarted {
		t.Fatal("prefetch not admitted after the unread ones expired")
	}
	if w := testutilWasted(c, "expired"); w != 2*cb {
		t.Fatalf("%v bytes expired, want %d", w, 2*cb)
	}
}

// A prefetch made for a Reader that keeps reading does not expire however
// much other readers load meanwhile; once its reader stops, it expires
// after a memory budget's worth of loads, as one without a reader does.
func TestReadingReaderKeepsPrefetch(t *testing.T) {
	const cb = 4096
	s := newStore(64 * cb)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, MaxInflightGets: 4, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, nil)
	r := c.NewReader()
	for i := int64(0); i < 2; i++ {
		if c.PrefetchFor(o, i, r) != PrefetchStarted {
			t.Fatalf("prefetch %d not started", i)
		}
		c.Settle()
	}
	// Three memory budgets' worth of demand loads elsewhere, the reader
	// reading between them.
	for i := int64(0); i < 24; i++ {
		view(t, c, o, s, (20+i%40)*cb, cb)
		c.Active(r)
	}
	if c.Prefetch(o, 2) != PrefetchSkipped {
		t.Fatal("a reading reader's prefetches expired")
	}
	if w := testutilWasted(c, "expired"); w != 0 {
		t.Fatalf("%v bytes expired while their reader read on", w)
	}
	for i := int64(0); i < 9; i++ { // the reader stopped
		view(t, c, o, s, (44+i)*cb, cb)
	}
	if c.Prefetch(o, 2) != PrefetchStarted {
		t.Fatal("prefetch not admitted after a stopped reader's expired")
	}
	if w := testutilWasted(c, "expired"); w != 2*cb {
		t.Fatalf("%v bytes expired, want %d", w, 2*cb)
	}
}

// Pooled buffers are never handed to two live chunks: under concurrent
// pinned and unpinned readers of more chunks than fit, with eviction all
// the time, every byte read is right and the pool's own check (a buffer
// handed out twice, or put back twice, panics) holds. Run with -race.
func TestPoolNeverSharesBuffers(t *testing.T) {
	const cb = 4096
	s := newStore(40 * cb)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: cb, MemoryBytes: 6 * cb, MaxInflightGets: 3, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, nil)
	c.pool.live = map[*byte]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				ch := int64((g*13 + i*7) % 40)
				c.Prefetch(o, (ch+1)%40)
				if i%3 == 0 { // an unpinned view: its chunk's buffer escapes
					view(t, c, o, s, ch*cb+10, 100)
					continue
				}
				p := c.Pin(o, ch*cb, cb)
				v, err := p.View(context.Background(), ch*cb, cb)
				if err != nil || !bytes.Equal(v, s.data[ch*cb:(ch+1)*cb]) {
					t.Errorf("pinned view of chunk %d: %v", ch, err)
				}
				p.Release()
			}
		}(g)
	}
	wg.Wait()
	c.Settle()
	if c.pool.reused.Load() == 0 {
		t.Fatal("no buffer was reused: the test does not exercise the pool")
	}
	if testutil.ToFloat64(c.m.loadedBytes) <= float64(len(s.data)) {
		t.Fatal("nothing was loaded twice: the test does not evict")
	}
}

func TestPrefetchMetricsNamed(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(DefaultConfig(), reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"tierd_cache_prefetch_bytes", "tierd_cache_prefetch_skipped_total", "tierd_cache_prefetch_wasted_bytes_total", "tierd_cache_loaded_bytes_total"} {
		if !strings.Contains(all, want) {
			t.Fatalf("metric %s not registered (have %s)", want, all)
		}
	}
}
