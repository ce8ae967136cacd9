package cache

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestCache(t *testing.T, cb int64) *Cache {
	t.Helper()
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 64 * cb, MaxInflightGets: 4, PrefetchBudgetBytes: 8 * cb, LoadTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// pinned pins bytes [off, off+n) with read-ahead ahead, checks them and
// returns the pin and a view of them.
func pinned(t *testing.T, c *Cache, o Object, s *store, off, n, ahead int64) (*Pin, []byte) {
	t.Helper()
	p := c.PinAhead(o, off, n, ahead)
	v, err := p.View(context.Background(), off, n)
	if err != nil || !bytes.Equal(v, s.data[off:off+n]) {
		t.Fatalf("pinned view %d+%d: %v (right bytes: %v)", off, n, err, bytes.Equal(v, s.data[off:off+n]))
	}
	return p, v
}

// PinAhead's loads take the bytes asked and then exactly the read-ahead
// asked for, within the chunk: a load going on past a cached part takes
// no part twice as long, which is Pin's rule (and PinAhead's with no
// read-ahead).
func TestPinAheadBoundsLoads(t *testing.T) {
	const cb = 4096 // the least a load inside a chunk takes: 1024
	s := newStore(4 * cb)
	o := s.object("obj")
	c := newTestCache(t, cb)
	step := func(off, n, ahead, wantBytes int64) {
		t.Helper()
		before := s.bytes.Load()
		p, _ := pinned(t, c, o, s, off, n, ahead)
		p.Release()
		c.Settle()
		if got := s.bytes.Load() - before; got != wantBytes {
			t.Fatalf("pin %d+%d ahead %d: %d bytes loaded, want %d", off, n, ahead, got, wantBytes)
		}
	}
	step(0, 1500, 1000, 2500)     // from the chunk's start: the bytes and the read-ahead
	step(2500, 1200, 100, 1300)   // going on past the part: no doubling (to 4096)
	step(3800, 100, 5000, 296)    // read-ahead ends at the chunk's end
	step(cb+100, 1500, 300, 1800) // a first load inside a chunk
	// Pin's own rule for a read going on past the cached part: a part
	// twice as long.
	step(2*cb, 1100, 0, 1100)
	step(2*cb+1100, 200, 0, 1100)
}

// A part read ahead for grows in place: the next window's load writes
// into the same buffer after the part's bytes (no copy, no new buffer),
// the older part's views keep their bytes, and the buffer goes back to
// the pool only once neither part is held. A second part growing from
// the same one (after the first failed) gets a buffer of its own, as a
// reader may still hold bytes the failed one wrote there.
func TestPartGrowsInPlace(t *testing.T) {
	const cb = 4096
	s := newStore(4 * cb)
	o := s.object("obj")
	c := newTestCache(t, cb)
	c.pool.live = map[*byte]bool{}
	p1, v1 := pinned(t, c, o, s, 0, 1500, 500)
	c.Settle()
	p2, _ := pinned(t, c, o, s, 1900, 1000, 500) // extends [0, 2000) to [0, 3400)
	v2, err := p2.View(context.Background(), 1900, 100)
	if err != nil {
		t.Fatal(err)
	}
	if &v2[0] != &v1[:cap(v1)][1900] {
		t.Fatal("the part read on into was copied into a new buffer, not grown in place")
	}
	if !bytes.Equal(v1, s.data[:1500]) {
		t.Fatal("the older part's view changed")
	}
	first := &v1[:1][0]
	p1.Release()
	p2.Release()
	c.Drop()
	if c.pool.live[first] {
		t.Fatal("the shared buffer did not go back to the pool once both parts were let go")
	}

	// A part whose growth in place failed is not grown in place again.
	c2 := newTestCache(t, cb)
	q1, w1 := pinned(t, c2, o, s, cb, 1000, 200) // [0, 1200) of chunk 1
	c2.Settle()
	s.fail.Store(true)
	q2 := c2.PinAhead(o, cb+1100, 500, 200)
	if _, err := q2.View(context.Background(), cb+1100, 500); err == nil {
		t.Fatal("a failed load answered")
	}
	q2.Release()
	c2.Settle()
	s.fail.Store(false)
	q3, _ := pinned(t, c2, o, s, cb+1100, 500, 200)
	w3, err := q3.View(context.Background(), cb+1150, 10)
	if err != nil {
		t.Fatal(err)
	}
	if &w3[0] == &w1[:cap(w1)][1150] {
		t.Fatal("a part grew in place twice from the same part")
	}
	if !bytes.Equal(w1, s.data[cb:cb+1000]) {
		t.Fatal("the older part's view changed")
	}
	q1.Release()
	q3.Release()
}

// A read going on past a part still loading extends that part: its load
// waits for it and asks the store only for the bytes after it, so no
// byte is fetched twice.
func TestExtendPartInFlight(t *testing.T) {
	const cb = 4096
	s := newStore(2 * cb)
	s.gate, s.gateAt = make(chan struct{}), 100
	o := s.object("obj")
	c := newTestCache(t, cb)
	p1 := c.PinAhead(o, 0, 1000, 1000)   // [0, 2000), held after 100 bytes
	p2 := c.PinAhead(o, 1500, 1500, 500) // [1500, 3500): past it
	close(s.gate)
	for _, x := range []struct {
		p      *Pin
		off, n int64
	}{{p1, 0, 1000}, {p2, 1500, 1500}} {
		v, err := x.p.View(context.Background(), x.off, x.n)
		if err != nil || !bytes.Equal(v, s.data[x.off:x.off+x.n]) {
			t.Fatalf("view %d+%d: %v", x.off, x.n, err)
		}
		x.p.Release()
	}
	c.Settle()
	if b, g := s.bytes.Load(), s.gets.Load(); b != 3500 || g != 2 {
		t.Fatalf("%d bytes in %d GETs for bytes 0-3500, want 3500 in 2", b, g)
	}
}

// PrefetchPart loads a window inside a chunk, extends the cached part
// that reaches it (in place, its prefetched bytes not counted wasted),
// answers present for bytes cached, and CoveredTo says how far from a
// byte the cache holds the bytes.
func TestPrefetchPart(t *testing.T) {
	const cb = 4096
	s := newStore(2 * cb)
	o := s.object("obj")
	c := newTestCache(t, cb)
	r := c.NewReader()
	if got := c.PrefetchPart(o, 0, 1000, 2000, r); got != PrefetchStarted {
		t.Fatalf("PrefetchPart of nothing cached: %v", got)
	}
	c.Settle()
	if got := c.CoveredTo(o, 0, 1000); got != 2000 {
		t.Fatalf("CoveredTo(1000) = %d after a prefetch of 1000-2000", got)
	}
	if got := c.CoveredTo(o, 0, 500); got != 500 {
		t.Fatalf("CoveredTo(500) = %d, want 500 (not held)", got)
	}
	if got := c.PrefetchPart(o, 0, 1200, 1900, r); got != PrefetchPresent {
		t.Fatalf("PrefetchPart of cached bytes: %v", got)
	}
	if got := c.PrefetchPart(o, 0, 1800, 3000, r); got != PrefetchStarted {
		t.Fatalf("PrefetchPart past the cached part: %v", got)
	}
	c.Settle()
	if b := s.bytes.Load(); b != 2000 {
		t.Fatalf("%d bytes loaded for 1000-3000, want 2000", b)
	}
	if got := c.CoveredTo(o, 0, 1000); got != 3000 {
		t.Fatalf("CoveredTo(1000) = %d after the extension, want 3000", got)
	}
	if now, _ := c.PrefetchHeld(); now != 2000 {
		t.Fatalf("prefetch budget holds %d bytes, want the extended part's 2000", now)
	}
	if w := testutil.ToFloat64(c.m.prefetchWasted.WithLabelValues("evicted")); w != 0 {
		t.Fatalf("%v prefetched bytes counted wasted when the part was extended", w)
	}
	p, _ := pinned(t, c, o, s, 1000, 2000, 0)
	p.Release()
	if now, _ := c.PrefetchHeld(); now != 0 {
		t.Fatalf("prefetch budget holds %d bytes after the part was read", now)
	}
	if b := s.bytes.Load(); b != 2000 {
		t.Fatalf("reading the prefetched bytes loaded %d more", b-2000)
	}
}

// ViewSome answers with the bytes that have arrived once at least the
// bytes asked for have, and never past the chunk's end.
func TestViewSome(t *testing.T) {
	const cb = 4096
	s := newStore(2 * cb)
	s.gate, s.gateAt = make(chan struct{}), 700
	o := s.object("obj")
	c := newTestCache(t, cb)
	p := c.PinAhead(o, 100, 3000, 0)
	defer p.Release()
	v, err := p.ViewSome(context.Background(), 100, 3000, 500)
	if err != nil || len(v) < 500 || len(v) > 700 || !bytes.Equal(v, s.data[100:100+len(v)]) {
		t.Fatalf("ViewSome before the gate: %d bytes, %v", len(v), err)
	}
	close(s.gate)
	v, err = p.ViewSome(context.Background(), 100, 3000, 3000)
	if err != nil || !bytes.Equal(v, s.data[100:3100]) {
		t.Fatalf("ViewSome of all: %d bytes, %v", len(v), err)
	}
	p2 := c.PinAhead(o, cb-100, 300, 0)
	defer p2.Release()
	if v, err := p2.ViewSome(context.Background(), cb-100, 300, 300); err != nil || !bytes.Equal(v, s.data[cb-100:cb]) {
		t.Fatalf("ViewSome across a chunk's end: %d bytes, %v; want the 100 to its end", len(v), err)
	}
}

// PrefetchRange loads a window across chunk boundaries with one GET:
// the first chunk's part extended, the next chunks nothing holds from
// their first byte; it stops at a chunk held already and says where it
// stopped, and a later call goes on from there.
func TestPrefetchRangeOneGET(t *testing.T) {
	const cb = 4096
	s := newStore(6 * cb)
	o := s.object("obj")
	c := newTestCache(t, cb)
	p, _ := pinned(t, c, o, s, 4*cb, 100, 0) // chunk 4 holds a part
	p.Release()
	c.Settle()
	gets, loaded := s.gets.Load(), s.bytes.Load()
	out, next := c.PrefetchRange(o, cb+1000, 5*cb+100, nil)
	if out != PrefetchStarted || next != 4*cb {
		t.Fatalf("PrefetchRange(chunks 1-5): %v, next %d; want started, up to chunk 4 (held)", out, next)
	}
	c.Settle()
	if g, b := s.gets.Load()-gets, s.bytes.Load()-loaded; g != 1 || b != 3*cb-1000 {
		t.Fatalf("%d GETs of %d bytes for chunks 1-3 from byte 1000, want 1 of %d", g, b, 3*cb-1000)
	}
	for i := int64(1); i < 4; i++ {
		from := int64(0)
		if i == 1 {
			from = 1000
		}
		if got := c.CoveredTo(o, i, from); got != cb {
			t.Fatalf("chunk %d covered from %d to %d, want its end", i, from, got)
		}
	}
	if out, next := c.PrefetchRange(o, 4*cb, 5*cb+100, nil); out != PrefetchStarted || next != 5*cb+100 {
		t.Fatalf("PrefetchRange from the held chunk: %v, next %d", out, next)
	}
	c.Settle()
	pp, _ := pinned(t, c, o, s, cb+1000, 4*cb-900, 0)
	pp.Release()
	if g := s.gets.Load() - gets; g != 2 {
		t.Fatalf("%d GETs for the two windows and reading them, want 2", g)
	}
}
