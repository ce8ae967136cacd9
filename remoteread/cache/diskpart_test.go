package cache

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// A part of a chunk loaded while the cache is crowded, whose disk write
// ends after that of a whole-chunk load of the same chunk, does not
// replace the whole chunk's file: after the memory tier lets the chunk
// go, any read of it is served from the disk tier, with no GET, and
// right. (The part's GET is held until the whole chunk's load has
// written its file.)
func TestDiskTierKeepsWholeChunkOverPart(t *testing.T) {
	const cb = 64 << 10 // minLoad 16 KiB
	s := newStore(4 * cb)
	o := s.object("obj")
	const partAt = cb + 40000 // where the crowded read's part starts
	held, opened := make(chan struct{}), make(chan struct{})
	open := o.Open
	o.Open = func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		rc, err := open(ctx, start, end)
		if err == nil && start == partAt { // the part's GET: its body waits for held
			close(opened)
			return struct {
				io.Reader
				io.Closer
			}{&gatedReader{r: rc, gate: held}, rc}, nil
		}
		return rc, err
	}
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, DiskDir: t.TempDir(), DiskBytes: 1 << 20, MaxInflightGets: 4, LoadTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 { // 5 readers x 2 chunks > 8 chunks of memory
		c.NewReader()
	}
	if crowded, _ := c.Crowded(); !crowded {
		t.Fatal("5 readers, 8 chunks of memory: not crowded")
	}
	ctx := context.Background()
	part := make(chan error, 1)
	go func() { // a crowded read in chunk 1: a part of minLoad
		v, err := c.Read(ctx, o, partAt, 100, nil)
		if err == nil && !bytes.Equal(v, s.data[partAt:partAt+100]) {
			err = io.ErrUnexpectedEOF
		}
		part <- err
	}()
	<-opened // the part's load is in flight, its body held
	// A read across chunk 1 loads it whole, beside the part in flight.
	if v, err := c.Read(ctx, o, cb-10, cb+20, nil); err != nil || !bytes.Equal(v, s.data[cb-10:2*cb+10]) {
		t.Fatalf("read across chunk 1: %v", err)
	}
	for c.pending.Load() > 1 { // its disk write is done; the part's load still runs
		time.Sleep(time.Millisecond)
	}
	close(held)
	if err := <-part; err != nil {
		t.Fatalf("crowded read in chunk 1: %v", err)
	}
	c.Settle()
	c.mem.clear()
	gets := s.gets.Load()
	for _, r := range [][2]int64{{0, cb}, {100, 200}, {cb - 300, 300}} {
		off, n := cb+r[0], r[1]
		if v, err := c.Read(ctx, o, off, n, nil); err != nil || !bytes.Equal(v, s.data[off:off+n]) {
			t.Fatalf("read %d+%d of chunk 1: %v", off, n, err)
		}
		c.mem.clear()
	}
	if g := s.gets.Load() - gets; g != 0 {
		t.Fatalf("%d GETs reading chunk 1 after its whole-chunk file was written: a part replaced it", g)
	}
}

// A chunk the disk tier holds whole is not prefetched from the store
// again (PrefetchPresent, no GET): the reader's read takes it from disk.
func TestPrefetchSkipsChunkOnDisk(t *testing.T) {
	const cb = 4096
	s := newStore(8 * cb)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 4 * cb, DiskDir: t.TempDir(), DiskBytes: 1 << 20, MaxInflightGets: 4, PrefetchBudgetBytes: 2 * cb, LoadTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	view(t, c, o, s, 0, 2*cb) // chunks 0 and 1, whole
	view(t, c, o, s, 2*cb+100, 10)
	c.Settle()
	c.mem.clear()
	gets := s.gets.Load()
	if got := c.Prefetch(o, 1); got != PrefetchPresent {
		t.Fatalf("prefetch of a chunk the disk tier holds whole: %v, want present", got)
	}
	view(t, c, o, s, cb, cb)
	if g := s.gets.Load() - gets; g != 0 {
		t.Fatalf("%d GETs for a chunk on disk", g)
	}
	if got := c.Prefetch(o, 2); got != PrefetchStarted { // only a part of it is on disk
		t.Fatalf("prefetch of a chunk the disk tier holds a part of: %v, want started", got)
	}
}
