package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func chunk(i int64, n int) []byte { return bytes.Repeat([]byte{byte(i)}, n) }

func TestMemoryLRU(t *testing.T) {
	c, err := New(Config{ChunkBytes: 4096, MemoryBytes: 3 * 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	get := func(i int64) {
		v, err := c.Get(context.Background(), "obj", i, func(context.Context) ([]byte, error) { loads++; return chunk(i, 4096), nil })
		if err != nil || !bytes.Equal(v, chunk(i, 4096)) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	for _, i := range []int64{0, 1, 2, 0, 1, 2} {
		get(i)
	}
	if loads != 3 {
		t.Fatalf("%d loads for 3 chunks within budget", loads)
	}
	get(3) // evicts chunk 0, the least recently used
	get(1)
	get(0)
	if loads != 5 {
		t.Fatalf("%d loads, want chunk 0 reloaded after eviction", loads)
	}
}

// Concurrent misses for one chunk make one load.
func TestSingleFlight(t *testing.T) {
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 1 << 20}, nil)
	var loads atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Get(context.Background(), "obj", 7, func(context.Context) ([]byte, error) {
				loads.Add(1)
				<-release
				return chunk(7, 100), nil
			})
			if err != nil || len(v) != 100 {
				t.Errorf("get: %v", err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for concurrent misses of one chunk", n)
	}
	// A failed load is not cached.
	_, err := c.Get(context.Background(), "obj", 8, func(context.Context) ([]byte, error) { return nil, errors.New("503") })
	if err == nil || c.Contains("obj", 8) {
		t.Fatalf("failed load: %v", err)
	}
}

// The disk tier survives a restart; a corrupt or truncated file is
// detected, deleted and loaded again; the budget holds.
func TestDiskTier(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ChunkBytes: 4096, MemoryBytes: 0, DiskDir: dir, DiskBytes: 3 * (4096 + headerLen)}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	load := func(i int64) Loader {
		return func(context.Context) ([]byte, error) { loads++; return chunk(i, 4096), nil }
	}
	for i := int64(0); i < 3; i++ {
		c.Get(context.Background(), "obj", i, load(i))
	}
	c, err = New(cfg, nil) // restart: the files are found
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		if v, err := c.Get(context.Background(), "obj", i, load(i)); err != nil || !bytes.Equal(v, chunk(i, 4096)) {
			t.Fatalf("chunk %d after restart: %v", i, err)
		}
	}
	if loads != 3 {
		t.Fatalf("%d loads, want the disk tier to serve after restart", loads)
	}
	// Damage: flip a byte in one file, truncate another.
	p1 := c.disk.path(hashName(key("obj", 1)))
	raw, _ := os.ReadFile(p1)
	raw[headerLen+10] ^= 1
	os.WriteFile(p1, raw, 0o644)
	p2 := c.disk.path(hashName(key("obj", 2)))
	os.Truncate(p2, 100)
	for _, i := range []int64{1, 2} {
		if v, err := c.Get(context.Background(), "obj", i, load(i)); err != nil || !bytes.Equal(v, chunk(i, 4096)) {
			t.Fatalf("damaged chunk %d: %v", i, err)
		}
	}
	if loads != 5 {
		t.Fatalf("%d loads, want the two damaged chunks loaded again", loads)
	}
	// Budget: a 4th chunk evicts the least recently used file.
	c.Get(context.Background(), "obj", 3, load(3))
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != 3 {
		t.Fatalf("%d files on disk, budget is 3", len(files))
	}
	// A leftover temporary file is removed on open.
	os.WriteFile(filepath.Join(filepath.Dir(files[0]), "x.tmp"), []byte("torn"), 0o644)
	if _, err := New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// Eviction and reload of the same chunks under concurrent readers: no
// error, no wrong bytes (files deleted under a reader stay readable).
func TestChurn(t *testing.T) {
	c, _ := New(Config{ChunkBytes: 4096, MemoryBytes: 4096, DiskDir: t.TempDir(), DiskBytes: 2 * (4096 + headerLen)}, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1250; i++ {
				idx := int64((g + i) % 5)
				v, err := c.Get(context.Background(), "obj", idx, func(context.Context) ([]byte, error) { return chunk(idx, 4096), nil })
				if err != nil || !bytes.Equal(v, chunk(idx, 4096)) {
					t.Errorf("chunk %d: %v", idx, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func BenchmarkMemoryHit(b *testing.B) {
	c, _ := New(Config{ChunkBytes: 4 << 20, MemoryBytes: 64 << 20}, nil)
	load := func(context.Context) ([]byte, error) { return make([]byte, 4<<20), nil }
	c.Get(context.Background(), "obj", 0, load)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.Get(context.Background(), "obj", 0, load)
	}
}
