package cache

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"
)

// Readers pinning random and sequential ranges of a few objects while the
// cache flips between crowded and not (Readers made and done all the
// while), with prefetches started meanwhile: every view holds the
// object's bytes until its Pin is released, however the memory tier
// replaces parts (crowded loads take the chunk's place), and no pooled
// buffer backs two live slots. Run with -race.
func TestCrowdFlipKeepsPinnedBytes(t *testing.T) {
	const cb = 16 << 10
	stores := []*store{seededStore(12*cb, 0), seededStore(12*cb, 0x5a), seededStore(12*cb+777, 0xc3)}
	var objs []Object
	for i, s := range stores {
		objs = append(objs, s.object(string(rune('a'+i))))
	}
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 4 * cb, MaxInflightGets: 3, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.pool.live = map[*byte]bool{}
	ctx := context.Background()
	stop := make(chan struct{})
	var flipper sync.WaitGroup
	flipper.Add(1)
	go func() { // crowds the cache and lets it go, over and over
		defer flipper.Done()
		for {
			var rs []*Reader
			for range 6 {
				rs = append(rs, c.NewReader())
			}
			time.Sleep(200 * time.Microsecond)
			for _, r := range rs {
				c.ReaderDone(r)
				c.ReaderDone(r) // twice: no harm
			}
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			r := c.NewReader()
			defer c.ReaderDone(r)
			for it := 0; it < 150; it++ {
				j := rng.Intn(len(objs))
				o, data := objs[j], stores[j].data
				off := rng.Int63n(o.Size - 1)
				n := 1 + rng.Int63n(min(o.Size-off, 3*cb))
				if g%2 == 0 { // sequential in small steps, which grows parts
					off = int64(it%40) * 2000
					n = min(5000, o.Size-off)
				}
				p := c.Pin(o, off, n)
				parts, err := p.Slices(ctx, off, n, nil)
				if err != nil {
					errs <- err.Error()
					p.Release()
					return
				}
				c.PrefetchFor(o, (off+n)/cb, r)
				c.Active(r)
				time.Sleep(time.Duration(rng.Intn(200)) * time.Microsecond) // others churn meanwhile
				got := bytes.Join(parts, nil)
				if !bytes.Equal(got, data[off:off+n]) {
					errs <- "wrong bytes"
					p.Release()
					return
				}
				p.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	flipper.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	c.Settle()
	if n := c.Pinned(); n != 0 {
		t.Fatalf("%d pins left", n)
	}
	c.mem.mu.Lock()
	var sum int64
	for e := c.mem.ll.Front(); e != nil; e = e.Next() {
		sum += e.Value.(*entry).s.memBytes()
	}
	size, reserved, items := c.mem.size, c.mem.reserved, len(c.mem.items)
	c.mem.mu.Unlock()
	if sum != size || reserved != 0 || items != c.mem.ll.Len() || size > c.cfg.MemoryBytes {
		t.Fatalf("memory tier counts %d bytes (%d reserved, %d items), holds %d (%d entries), budget %d", size, reserved, items, sum, c.mem.ll.Len(), c.cfg.MemoryBytes)
	}
	c.Drop()
	if now, _ := c.PrefetchHeld(); now != 0 {
		t.Fatalf("prefetch budget holds %d bytes with the tiers empty", now)
	}
}

// A crowd whose readers all stopped reading (no ReaderDone, no later
// sequential read to count them again) no longer crowds the cache once
// they have been idle for readerIdle: a read going on past a cached part
// grows it again.
func TestCrowdEndsWhenReadersGoIdle(t *testing.T) {
	const cb = 64 << 10
	s := newStore(8 * cb)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 4 * cb, MaxInflightGets: 8, PrefetchBudgetBytes: 2 * cb, LoadTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rs []*Reader
	for range 5 {
		rs = append(rs, c.NewReader())
	}
	if crowded, _ := c.Crowded(); !crowded {
		t.Fatal("5 readers, 4 chunks of memory: not crowded")
	}
	// The readers stopped readerIdle ago, and so did the count.
	past := time.Now().Add(-2 * readerIdle).UnixNano()
	for _, r := range rs {
		r.seen.Store(past)
	}
	c.counted.Store(past)
	view(t, c, o, s, 1000, 1000) // a cold part
	c.Settle()
	view(t, c, o, s, c.minLoad()+1000, 1000) // reading on past it
	c.Settle()
	sl, ok := c.mem.acquire(key(o.Key, 0), false)
	if !ok {
		t.Fatal("chunk 0 not in the memory tier")
	}
	defer c.unref(sl)
	if sl.from != 1000 || sl.to-sl.from <= c.minLoad() {
		t.Fatalf("cached part %d-%d after reading on: want the part from 1000 grown past minLoad (%d), as with no crowd", sl.from, sl.to, c.minLoad())
	}
	if crowded, n := c.Crowded(); crowded || n != 0 {
		t.Fatalf("idle readers: crowded %v, %d active; want not crowded, 0", crowded, n)
	}
}

// Counting the active readers at each sequential read does not pass over
// all of them each time (a cost linear in the readers per read, under
// one lock): at most one pass per prunePeriod, and idle readers are
// still dropped by the next pass.
func TestReaderCountPrunesPeriodically(t *testing.T) {
	c, err := New(Config{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20, MaxInflightGets: 8, LoadTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prunes := func() int64 { c.rmu.Lock(); defer c.rmu.Unlock(); return c.prunes }
	var rs []*Reader
	for range 1000 {
		rs = append(rs, c.NewReader())
	}
	start, before := time.Now(), prunes()
	for i := range 5000 {
		c.Active(rs[i%len(rs)])
	}
	if n, most := prunes()-before, 1+int64(time.Since(start)/prunePeriod); n > most {
		t.Fatalf("%d passes over the readers in 5000 reads over %s, want at most %d", n, time.Since(start), most)
	}
	past := time.Now().Add(-2 * readerIdle).UnixNano()
	for _, r := range rs[1:] {
		r.seen.Store(past)
	}
	c.rmu.Lock()
	c.pruned = past // the last pass is old
	c.rmu.Unlock()
	c.Active(rs[0])
	if _, n := c.Crowded(); n != 1 {
		t.Fatalf("%d readers active after 999 went idle, want 1", n)
	}
}
