package remoteread

import (
	"context"
	"testing"

	"github.com/tierd/tierd/internal/testutil/readtest"
)

// TestReconfigureChunkCache: a reload's chunk cache budgets apply at once
// (a smaller memory budget evicts down to it); a disk budget of 0, which
// would turn the disk tier off, is kept as it runs; a memory budget below
// two chunks changes nothing.
func TestReconfigureChunkCache(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes, cfg.Cache.MemoryBytes, cfg.Cache.DiskDir, cfg.Cache.DiskBytes = 4096, 64*4096, t.TempDir(), 64*4096
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	for off := int64(0); off < 400; off += 50 {
		if _, err := e.eng.ReadRemote(context.Background(), e.TP, off, 1); err != nil {
			t.Fatal(err)
		}
	}
	next := cfg
	next.Cache.MemoryBytes, next.Cache.DiskBytes = 2*4096, 8*4096
	if err := e.eng.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if m, d := e.eng.Cache().Budgets(); m != 2*4096 || d != 8*4096 {
		t.Fatalf("budgets after Reconfigure: %d, %d", m, d)
	}
	if c := e.eng.Config().Cache; c.MemoryBytes != 2*4096 || c.DiskBytes != 8*4096 {
		t.Fatalf("config after Reconfigure: %+v", c)
	}
	if _, err := e.eng.ReadRemote(context.Background(), e.TP, 0, 1); err != nil {
		t.Fatalf("read under the smaller budgets: %v", err)
	}
	off := next
	off.Cache.DiskBytes = 0
	if err := e.eng.Reconfigure(off); err != nil {
		t.Fatal(err)
	}
	if _, d := e.eng.Cache().Budgets(); d != 8*4096 || e.eng.Config().Cache.DiskBytes != 8*4096 {
		t.Fatalf("a disk budget of 0 turned the disk tier: budget %d", d)
	}
	bad := next
	bad.Cache.MemoryBytes = 4096
	if err := e.eng.Reconfigure(bad); err == nil {
		t.Fatal("a memory budget of one chunk accepted")
	}
	if m, _ := e.eng.Cache().Budgets(); m != 2*4096 {
		t.Fatalf("a refused Reconfigure changed the memory budget to %d", m)
	}
}
