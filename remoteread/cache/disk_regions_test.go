package cache

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A random reader's part of a chunk, in a region the chunk's disk file
// does not hold, reaches the disk tier even when that file holds more
// bytes (of another region): else every read of that region, once the
// memory tier let it go, is a GET again, while each such read keeps the
// useless file hot in the disk tier's LRU.
func TestDiskTierTakesPartOfOtherRegion(t *testing.T) {
	const cb = 64 << 10 // minLoad 16 KiB
	s := newStore(4 * cb)
	o := s.object("obj")
	c, err := New(Config{ChunkBytes: cb, MemoryBytes: 8 * cb, DiskDir: t.TempDir(), DiskBytes: 1 << 20, MaxInflightGets: 4, LoadTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	read := func(off, n int64) {
		t.Helper()
		if v, err := c.Read(ctx, o, off, n, nil); err != nil || !bytes.Equal(v, s.data[off:off+n]) {
			t.Fatalf("read %d+%d: %v", off, n, err)
		}
		c.Settle()
		c.mem.clear()
	}
	read(cb+100, 30000)   // part [100, 30100) of chunk 1: its disk file
	read(cb+40000, 100)   // part [40000, 56384): not held by that file
	gets := s.gets.Load() // from here on, reads of [40000, 40100) should hit the disk
	for range 3 {
		read(cb+40000, 100)
	}
	if g := s.gets.Load() - gets; g != 0 {
		t.Fatalf("%d GETs for 3 reads of a region of chunk 1 read before: its part never reached the disk tier (a larger part of another region kept its place)", g)
	}
}
