package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// store is an object of known bytes that counts its GETs. A gate, when
// set, holds every body after its first gateAt bytes until closed.
type store struct {
	data   []byte
	gets   atomic.Int32
	bytes  atomic.Int64
	fail   atomic.Bool
	gate   chan struct{}
	gateAt int
}

func newStore(n int) *store {
	s := &store{data: make([]byte, n)}
	for i := range s.data {
		s.data[i] = byte(i*7 + i/4096)
	}
	return s
}

func (s *store) object(key string) Object {
	return Object{Key: key, Size: int64(len(s.data)), Open: s.open}
}

type gatedReader struct {
	r      io.Reader
	n      int
	gate   chan struct{}
	gateAt int
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.gate != nil && g.n >= g.gateAt {
		<-g.gate
		g.gate = nil
	}
	if g.gate != nil && g.n+len(p) > g.gateAt {
		p = p[:g.gateAt-g.n]
	}
	n, err := g.r.Read(p)
	g.n += n
	return n, err
}

func (s *store) open(ctx context.Context, start, end int64) (io.ReadCloser, error) {
	s.gets.Add(1)
	if s.fail.Load() {
		return nil, errors.New("503 SlowDown")
	}
	s.bytes.Add(end - start)
	return io.NopCloser(&gatedReader{r: bytes.NewReader(s.data[start:end]), gate: s.gate, gateAt: s.gateAt}), nil
}

func view(t *testing.T, c *Cache, o Object, s *store, off, n int64) {
	t.Helper()
	v, err := c.View(context.Background(), o, off, n)
	if err != nil {
		t.Fatalf("view %d+%d: %v", off, n, err)
	}
	if !bytes.Equal(v, s.data[off:off+n]) {
		t.Fatalf("view %d+%d: wrong bytes", off, n)
	}
}

func TestMemoryLRU(t *testing.T) {
	s := newStore(10 * 4096)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: 4096, MemoryBytes: 3 * 4096, MaxInflightGets: 2, LoadTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 1, 2, 0, 1, 2} {
		view(t, c, o, s, i*4096, 4096)
	}
	if n := s.gets.Load(); n != 3 {
		t.Fatalf("%d GETs for 3 chunks within budget", n)
	}
	view(t, c, o, s, 3*4096, 100) // evicts chunk 0, the least recently used
	c.loads.Wait()
	view(t, c, o, s, 4096, 10)
	view(t, c, o, s, 0, 10)
	if n := s.gets.Load(); n != 5 {
		t.Fatalf("%d GETs, want chunk 0 loaded again after eviction", n)
	}
	// A range across three chunks is one copy of the right bytes.
	view(t, c, o, s, 4096-5, 2*4096+10)
	// Out of range.
	if _, err := c.View(context.Background(), o, int64(len(s.data))-1, 2); err == nil {
		t.Fatal("view past the object's end: no error")
	}
}

// A cold read loads its own bytes, at least a quarter chunk, within the
// chunk (one GET); a read elsewhere in the chunk loads its own bytes
// too, not the whole chunk; a read going on past a cached part loads a
// part twice as long (up to the chunk's end) without loading the cached
// part again, and after that nothing is loaded again.
func TestPartialLoad(t *testing.T) {
	s := newStore(3 * 4096)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 2, LoadTimeout: time.Second}, nil)
	view(t, c, o, s, 4096+3000, 500)
	if g, b := s.gets.Load(), s.bytes.Load(); g != 1 || b != 1024 {
		t.Fatalf("cold read: %d GETs of %d bytes, want 1 of a quarter chunk", g, b)
	}
	view(t, c, o, s, 4096+3500, 524) // within the part loaded: a hit
	view(t, c, o, s, 4096+100, 10)   // before it: its own quarter chunk
	if g, b := s.gets.Load(), s.bytes.Load(); g != 2 || b != 2048 {
		t.Fatalf("read elsewhere in the chunk: %d GETs of %d bytes in all, want 2 of 2048", g, b)
	}
	view(t, c, o, s, 4096+1000, 500) // past [100, 1124): on to 2148, twice the part
	if g, b := s.gets.Load(), s.bytes.Load(); g != 3 || b != 3*1024 {
		t.Fatalf("read on past the cached part: %d GETs of %d bytes in all, want 3 of %d", g, b, 3*1024)
	}
	view(t, c, o, s, 4096+100, 3996) // on to the chunk's end
	if g, b := s.gets.Load(), s.bytes.Load(); g != 4 || b != 3*1024+4096-2148 {
		t.Fatalf("read to the chunk's end: %d GETs of %d bytes in all, want 4 of %d", g, b, 3*1024+4096-2148)
	}
	view(t, c, o, s, 4096+3000, 100)
	view(t, c, o, s, 4096+100, 3996)
	if g := s.gets.Load(); g != 4 {
		t.Fatalf("%d GETs, want 4", g)
	}
}

// A reader waits only for its own bytes: it returns while the rest of the
// chunk is still arriving, and later readers join that load.
func TestProgressiveLoad(t *testing.T) {
	s := newStore(4 << 20)
	s.gate, s.gateAt = make(chan struct{}), 200<<10
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 1 << 20, MemoryBytes: 8 << 20, MaxInflightGets: 2, LoadTimeout: 5 * time.Second}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.View(ctx, o, 1, 100<<10) // loads [1, 256 KiB + 1); arrives before the gate
	if err != nil || !bytes.Equal(v, s.data[1:1+100<<10]) {
		t.Fatalf("first bytes while the body is held: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.View(short, o, 250<<10, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bytes past the gate: %v, want the reader's deadline", err)
	}
	close(s.gate) // the load went on without the reader that gave up
	view(t, c, o, s, 250<<10, 6<<10)
	if g := s.gets.Load(); g != 1 {
		t.Fatalf("%d GETs, want 1", g)
	}
	if b := s.bytes.Load(); b != 256<<10 {
		t.Fatalf("first load of %d bytes, want a quarter chunk", b)
	}
}

// Concurrent misses for one chunk make one GET; a failed load is not
// cached and the next read tries again.
func TestSingleFlight(t *testing.T) {
	s := newStore(4 * 4096)
	s.gate, s.gateAt = make(chan struct{}), 0
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 4, LoadTimeout: 5 * time.Second}, nil)
	var wg sync.WaitGroup
	read := func(g int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(2*4096 + 100 + g*10)
			v, err := c.View(context.Background(), o, off, 50)
			if err != nil || !bytes.Equal(v, s.data[off:off+50]) {
				t.Errorf("reader %d: %v", g, err)
			}
		}()
	}
	// The first reader's load (a quarter chunk from its offset) is in
	// flight before the others come: they all share it. (Readers racing
	// to be first at different offsets may each start a load, which the
	// nearby-load merge then bounds; that is not what this tests.)
	read(0)
	for !c.Loading(o, 2) {
		time.Sleep(time.Millisecond)
	}
	for g := 1; g < 32; g++ {
		read(g)
	}
	time.Sleep(50 * time.Millisecond)
	close(s.gate)
	wg.Wait()
	if g := s.gets.Load(); g != 1 {
		t.Fatalf("%d GETs for 32 concurrent misses of one chunk", g)
	}
	s.gate = nil
	s.fail.Store(true)
	if _, err := c.View(context.Background(), o, 0, 10); err == nil {
		t.Fatal("failed GET: no error")
	}
	s.fail.Store(false)
	view(t, c, o, s, 0, 10)
}

// Exactly one GET when all readers ask for the same bytes at once.
func TestSingleFlightExact(t *testing.T) {
	s := newStore(4096)
	s.gate, s.gateAt = make(chan struct{}), 0
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 4, LoadTimeout: 5 * time.Second}, nil)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.View(context.Background(), o, 100, 3000); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(s.gate)
	wg.Wait()
	if g := s.gets.Load(); g != 1 {
		t.Fatalf("%d GETs, want 1", g)
	}
}

// Prefetch loads whole chunks, skips what is cached or loading, and
// leaves demand reads one GET slot of the two.
func TestPrefetch(t *testing.T) {
	s := newStore(8 * 4096)
	s.gate, s.gateAt = make(chan struct{}), 0
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 2, PrefetchBudgetBytes: 1 << 20, LoadTimeout: 5 * time.Second}, nil)
	started := 0
	for i := int64(0); i < 8; i++ {
		if c.Prefetch(o, i) == PrefetchStarted {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("%d prefetches started with 2 GET slots, want 1", started)
	}
	if c.Prefetch(o, 0) != PrefetchPresent || c.Prefetch(o, 8) != PrefetchPresent || c.Prefetch(o, -1) != PrefetchPresent {
		t.Fatal("prefetch of a chunk in flight or outside the object not reported present")
	}
	close(s.gate)
	view(t, c, o, s, 0, 2*4096) // chunk 0 prefetched, chunk 1 loaded on demand
	if g := s.gets.Load(); g != 2 {
		t.Fatalf("%d GETs, want the prefetch and one demand load", g)
	}
	if c.Prefetch(o, 1) != PrefetchPresent {
		t.Fatal("prefetch of a cached chunk started")
	}
	if now, _ := c.PrefetchHeld(); now != 0 {
		t.Fatalf("prefetch budget holds %d bytes after the prefetched chunk was read", now)
	}
}

// A range over several chunks not cached loads with one GET, filling each
// chunk's slot in turn; a body cut short fails the chunks it did not
// reach, and they load again on the next read.
func TestRangeCoalesces(t *testing.T) {
	s := newStore(8 * 4096)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 2, LoadTimeout: time.Second}, nil)
	c.Pin(o, 4096+100, 3*4096)
	view(t, c, o, s, 4096+100, 3*4096)
	if g, b := s.gets.Load(), s.bytes.Load(); g != 1 || b != 3*4096 {
		t.Fatalf("%d GETs of %d bytes for a range over 4 chunks, want 1 of exactly the range", g, b)
	}
	cut := s.object("cut")
	cut.Open = func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		s.gets.Add(1)
		return io.NopCloser(bytes.NewReader(s.data[start:min(end, start+5000)])), nil
	}
	c.Pin(cut, 0, 3*4096)
	c.Settle()
	if !c.mem.has(key("cut", 0)) {
		t.Fatal("chunk 0, whole before the cut, is not cached")
	}
	for _, i := range []int64{1, 2} {
		if c.mem.has(key("cut", i)) {
			t.Fatalf("chunk %d, cut short, is cached", i)
		}
	}
	before := s.gets.Load()
	view(t, c, s.object("cut"), s, 4096, 2*4096) // loads again
	if g := s.gets.Load() - before; g != 1 {
		t.Fatalf("%d GETs to read the failed chunks again", g)
	}
}

// The disk tier survives a restart, suffixes included; a corrupt or
// truncated file is detected, deleted and loaded again; the budget holds.
func TestDiskTier(t *testing.T) {
	dir := t.TempDir()
	s := newStore(8 * 4096)
	o := s.object("obj")
	cfg := Config{ChunkBytes: 4096, MemoryBytes: 2 * 4096, DiskDir: dir, DiskBytes: 3 * (4096 + headerLen), MaxInflightGets: 2, LoadTimeout: time.Second}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		view(t, c, o, s, i*4096, 4096)
	}
	c.Close()
	c, err = New(cfg, nil) // restart: the files are found
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		view(t, c, o, s, i*4096+7, 4000)
	}
	if g := s.gets.Load(); g != 3 {
		t.Fatalf("%d GETs, want the disk tier to serve after restart", g)
	}
	// Damage: flip a data byte in one file, the offset field in another,
	// truncate a third.
	damage := func(i int64, f func(p string)) { f(c.disk.path(c.disk.name(key("obj", i)))) }
	damage(0, func(p string) { raw, _ := os.ReadFile(p); raw[headerLen+10] ^= 1; os.WriteFile(p, raw, 0o644) })
	damage(1, func(p string) { raw, _ := os.ReadFile(p); raw[7] ^= 1; os.WriteFile(p, raw, 0o644) })
	damage(2, func(p string) { os.Truncate(p, 100) })
	c.mem.clear() // read them from disk
	for i := int64(0); i < 3; i++ {
		view(t, c, o, s, i*4096, 4096)
	}
	if g := s.gets.Load(); g != 6 {
		t.Fatalf("%d GETs, want the three damaged chunks loaded again", g)
	}
	// Budget: a 4th chunk evicts the least recently used file.
	view(t, c, o, s, 3*4096, 10)
	c.loads.Wait() // the disk write follows the readers
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != 3 {
		t.Fatalf("%d files on disk, budget is 3", len(files))
	}
	// A leftover temporary file is removed on open.
	torn := filepath.Base(files[0]) + ".123.tmp" // an interrupted write's name
	os.WriteFile(filepath.Join(filepath.Dir(files[0]), torn), []byte("torn"), 0o644)
	if _, err := New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// Files written with another chunk size, or copied over another chunk's
// file, are never served; files that are not the cache's are left alone.
func TestDiskTierForeignFiles(t *testing.T) {
	dir := t.TempDir()
	s := newStore(16 * 4096)
	o := s.object("obj")
	cfg := Config{ChunkBytes: 16 << 10, MemoryBytes: 2 * (16 << 10), DiskDir: dir, DiskBytes: 1 << 20, MaxInflightGets: 2, LoadTimeout: time.Second}
	c, _ := New(cfg, nil)
	view(t, c, o, s, 16384, 16384)
	view(t, c, o, s, 0, 16384)
	c.Close()
	cfg.ChunkBytes, cfg.MemoryBytes = 4096, 2*4096
	os.WriteFile(filepath.Join(dir, "notes.tmp"), []byte("mine"), 0o644)
	os.MkdirAll(filepath.Join(dir, "user", "deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "user", "deep", "report.tmp"), []byte("mine"), 0o644)
	c, _ = New(cfg, nil)
	for i := int64(0); i < 8; i++ {
		view(t, c, o, s, i*4096, 4096) // chunk i of 4 KiB, never the old 16 KiB chunk i
	}
	for _, f := range []string{"notes.tmp", "user/deep/report.tmp"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s, not the cache's, was removed: %v", f, err)
		}
	}
	// Copy chunk 1's file over chunk 2's: chunk 2 is loaded again, right.
	c.Settle()
	c.mem.clear()
	p1, p2 := c.disk.path(c.disk.name(key("obj", 1))), c.disk.path(c.disk.name(key("obj", 2)))
	raw, err := os.ReadFile(p1)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p2, raw, 0o644)
	before := s.gets.Load()
	view(t, c, o, s, 2*4096, 4096)
	if g := s.gets.Load() - before; g != 1 {
		t.Fatalf("%d GETs after a swapped file, want it refused and loaded again", g)
	}
}

// hangReader blocks in Read until closed, ignoring any context.
type hangReader struct{ closed chan struct{} }

func (h *hangReader) Read([]byte) (int, error) { <-h.closed; return 0, io.ErrClosedPipe }
func (h *hangReader) Close() error {
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	return nil
}

// A body that hangs and ignores its context is closed at
// remote.fetch.load.timeout: its readers get an error, the GET slot and
// the memory it reserved come back, later reads work and Close returns.
func TestHungBody(t *testing.T) {
	s := newStore(8 * 4096)
	o := s.object("obj")
	var hang atomic.Bool
	hang.Store(true)
	o.Open = func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		s.gets.Add(1)
		if hang.Load() {
			return &hangReader{closed: make(chan struct{})}, nil
		}
		return io.NopCloser(bytes.NewReader(s.data[start:end])), nil
	}
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 2 * 4096, MaxInflightGets: 2, LoadTimeout: 200 * time.Millisecond}, nil)
	var wg sync.WaitGroup
	for i := int64(0); i < 6; i++ { // more loads than slots and memory
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if _, err := c.View(context.Background(), o, i*4096, 4096); err == nil || time.Since(start) > 3*time.Second {
				t.Errorf("chunk %d from a hung body: %v after %s", i, err, time.Since(start))
			}
		}()
	}
	wg.Wait()
	hang.Store(false)
	view(t, c, o, s, 0, 8*4096)
	c.Settle()
	c.mem.mu.Lock()
	reserved := c.mem.reserved
	c.mem.mu.Unlock()
	if reserved != 0 || len(c.sem) != 0 {
		t.Fatalf("after the loads: %d bytes reserved, %d GET slots held", reserved, len(c.sem))
	}
	hang.Store(true)
	c.Pin(o, 0, 4096) // would hang; already cached, so no load
	c.mem.clear()
	c.Pin(o, 0, 4096) // hangs until Close
	start := time.Now()
	c.Close()
	if time.Since(start) > 2*time.Second {
		t.Fatalf("Close took %s with a hung body", time.Since(start))
	}
}

// A body cut short is an error for a reader of its missing bytes, not a
// short chunk, and is not cached.
func TestTruncatedBody(t *testing.T) {
	s := newStore(4096)
	o := s.object("obj")
	o.Open = func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		s.gets.Add(1)
		return io.NopCloser(bytes.NewReader(s.data[start : end-1])), nil
	}
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20, MaxInflightGets: 1, LoadTimeout: time.Second}, nil)
	for i := 0; i < 2; i++ {
		if _, err := c.View(context.Background(), o, 0, 4096); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("short body: %v", err)
		}
	}
	if g := s.gets.Load(); g != 2 {
		t.Fatalf("%d GETs, want the short chunk not cached", g)
	}
}

// Eviction and reload of the same chunks under concurrent readers: no
// error, no wrong bytes (files deleted under a reader stay readable).
func TestChurn(t *testing.T) {
	s := newStore(5 * 4096)
	o := s.object("obj")
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 2 * 4096, DiskDir: t.TempDir(), DiskBytes: 2 * (4096 + headerLen), MaxInflightGets: 3, LoadTimeout: 5 * time.Second}, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1250; i++ {
				off := int64((g*131 + i*977) % (5*4096 - 100))
				v, err := c.View(context.Background(), o, off, 100)
				if err != nil || !bytes.Equal(v, s.data[off:off+100]) {
					t.Errorf("view %d: %v", off, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	c.Close() // disk writes end before the directory goes
}

// Under concurrent readers of more chunks than fit, the memory tier and
// the loads in flight stay within the budget together.
func TestMemoryBudgetHolds(t *testing.T) {
	s := newStore(32 * 4096)
	o := s.object("obj")
	const budget = 4 * 4096
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: budget, MaxInflightGets: 3, LoadTimeout: 5 * time.Second}, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var worst atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.mem.mu.Lock()
			worst.Store(max(worst.Load(), c.mem.size+c.mem.reserved))
			c.mem.mu.Unlock()
		}
	}()
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				off := int64((g*7919 + i*4099) % (32*4096 - 5000))
				v, err := c.View(context.Background(), o, off, 5000)
				if err != nil || !bytes.Equal(v, s.data[off:off+5000]) {
					t.Errorf("view %d: %v", off, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	if w := worst.Load(); w > budget {
		t.Fatalf("memory tier + loads in flight reached %d bytes, budget %d", w, budget)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{ChunkBytes: 100, MemoryBytes: -1, MaxInflightGets: 0, PrefetchBudgetBytes: -1}
	err := bad.Validate()
	for _, want := range []string{"chunk.bytes", "two chunks", "inflight", "timeout", "prefetch.budget.bytes"} {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Fatalf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// The hit path: one chunk in memory, a 1 MiB view of it.
func BenchmarkMemoryHit(b *testing.B) {
	s := newStore(4 << 20)
	o := s.object("segment-0000")
	c, _ := New(DefaultConfig(), nil)
	if _, err := c.View(context.Background(), o, 0, 4<<20); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		if _, err := c.View(context.Background(), o, 1<<20, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrossChunkHit copies a view that spans two cached chunks.
func BenchmarkCrossChunkHit(b *testing.B) {
	s := newStore(8 << 20)
	o := s.object("segment-0001")
	c, _ := New(DefaultConfig(), nil)
	if _, err := c.View(context.Background(), o, 0, 8<<20); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		if _, err := c.View(context.Background(), o, 4<<20-(512<<10), 1<<20); err != nil {
			b.Fatal(fmt.Sprint(err))
		}
	}
}
