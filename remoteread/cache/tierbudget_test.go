package cache

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Shrinking the budgets of a running cache evicts the least recently used
// chunks down to them at once, in memory and on disk, while a reader's
// pinned chunks stay readable to it; growing them lets more stay; the
// disk tier cannot be turned on or off, and a bad budget changes nothing.
func TestSetBudgets(t *testing.T) {
	dir := t.TempDir()
	s := newStore(8 * 4096)
	o := s.object("obj")
	file := int64(4096 + headerLen)
	c, err := New(Config{ChunkBytes: 4096, MemoryBytes: 6 * 4096, DiskDir: dir, DiskBytes: 6 * file, MaxInflightGets: 2, LoadTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pin := c.Pin(o, 0, 4096) // chunk 0, held by a reader
	if _, err := pin.View(context.Background(), 0, 4096); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i < 6; i++ {
		view(t, c, o, s, i*4096, 4096)
	}
	c.Settle()
	memFiles := func() (int64, int) {
		c.mem.mu.Lock()
		size := c.mem.size
		c.mem.mu.Unlock()
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
		return size, len(files)
	}
	if size, files := memFiles(); size != 6*4096 || files != 6 {
		t.Fatalf("before: %d bytes in memory, %d files", size, files)
	}

	if err := c.SetBudgets(2*4096, 3*file); err != nil {
		t.Fatal(err)
	}
	if size, files := memFiles(); size != 2*4096 || files != 3 {
		t.Fatalf("after shrinking: %d bytes in memory, %d files; want 2 chunks and 3 files", size, files)
	}
	if m, d := c.Budgets(); m != 2*4096 || d != 3*file {
		t.Fatalf("budgets %d %d", m, d)
	}
	// Chunk 0 left memory and disk (the least recently used), and its
	// reader still reads it without a GET.
	gets := s.gets.Load()
	v, err := pin.View(context.Background(), 10, 100)
	if err != nil || !bytes.Equal(v, s.data[10:110]) || s.gets.Load() != gets {
		t.Fatalf("pinned read after eviction: %v, %d GETs more", err, s.gets.Load()-gets)
	}
	// The most recent chunks are still served from the cache.
	view(t, c, o, s, 5*4096, 4096)
	if s.gets.Load() != gets {
		t.Fatal("the most recent chunk was evicted")
	}

	// Growing: more chunks stay.
	if err := c.SetBudgets(5*4096, 5*file); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		view(t, c, o, s, i*4096, 4096)
	}
	c.Settle()
	if size, files := memFiles(); size != 5*4096 || files != 5 {
		t.Fatalf("after growing: %d bytes in memory, %d files", size, files)
	}

	for _, bad := range []struct{ mem, disk int64 }{{4096, 5 * file}, {5 * 4096, -1}, {5 * 4096, 0}} {
		err := c.SetBudgets(bad.mem, bad.disk)
		if err == nil {
			t.Fatalf("SetBudgets(%d, %d) accepted", bad.mem, bad.disk)
		}
		if bad.disk == 0 && !errors.Is(err, ErrDiskTierStatic) {
			t.Fatalf("turning the disk tier off: %v", err)
		}
		if m, d := c.Budgets(); m != 5*4096 || d != 5*file {
			t.Fatalf("a refused change changed the budgets to %d %d", m, d)
		}
	}
	noDisk, err := New(Config{ChunkBytes: 4096, MemoryBytes: 2 * 4096, DiskDir: dir, MaxInflightGets: 1, LoadTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer noDisk.Close()
	if err := noDisk.SetBudgets(2*4096, file); !errors.Is(err, ErrDiskTierStatic) {
		t.Fatalf("turning the disk tier on: %v", err)
	}
}
