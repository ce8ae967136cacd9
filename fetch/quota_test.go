package fetch

import (
	"context"
	"testing"
	"time"
)

// TestFetchQuota reads the 3 MiB reference log from the store under a
// 1 MiB/s fetch quota (remote.log.manager.fetch.max.bytes.per.second),
// set by Reconfigure on a server started without one: about three seconds,
// and the bytes read from the store over the time taken stay at the
// limit.
func TestFetchQuota(t *testing.T) {
	const limit = 1 << 20
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 20000 // reads wait for throttled loads instead of answering UNAVAILABLE
	e := newEnv(t, cfg)
	referenceLog(t, e)
	next := cfg
	next.FetchMaxBytesPerSecond = limit
	if err := e.srv.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := e.bucket.read.Load()
	start := time.Now()
	for off := int64(0); off < 600; {
		rr, err := e.srv.ReadRemote(ctx, e.tp, off, 256<<10)
		if err != nil {
			t.Fatalf("ReadRemote(%d): %v", off, err)
		}
		off = rr.Next
	}
	e.srv.Settle() // prefetches in flight count too
	read := e.bucket.read.Load() - before
	rate := float64(read) / time.Since(start).Seconds()
	ratio := rate / limit
	t.Logf("read %d bytes from the store at %.0f bytes/s: %.3f of the limit", read, rate, ratio)
	if read < 3_000_000 {
		t.Fatalf("read %d bytes from the store, want the whole log (about 3 MB)", read)
	}
	if ratio < 0.8 || ratio > 1.2 {
		t.Fatalf("fetch rate %.0f bytes/s is %.2fx the quota %d; want 0.8-1.2x", rate, ratio, limit)
	}
}

// TestReconfigure: the dynamic settings change for the requests that
// follow, a smaller index cache budget evicts at once, the static ones
// stay, and an invalid config changes nothing.
func TestReconfigure(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	referenceLog(t, e)
	if _, err := e.srv.ReadRemote(context.Background(), e.tp, 0, 1); err != nil {
		t.Fatal(err)
	}
	e.srv.idx.mu.Lock()
	cached := e.srv.idx.size
	e.srv.idx.mu.Unlock()
	if cached == 0 {
		t.Fatal("no index cached after a read")
	}
	next := DefaultConfig()
	next.Listen, next.MaxWaitMs, next.IndexCacheBytes, next.Cache.ChunkBytes = "127.0.0.1:1", 42, 0, 1<<20
	if err := e.srv.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	c := e.srv.conf()
	if c.MaxWaitMs != 42 || c.Listen != e.srv.cfg.Listen || c.Cache.ChunkBytes != e.srv.cfg.Cache.ChunkBytes {
		t.Fatalf("after Reconfigure: max wait %d (want 42), listen %s, chunk %d (want the static ones kept)", c.MaxWaitMs, c.Listen, c.Cache.ChunkBytes)
	}
	e.srv.idx.mu.Lock()
	cached = e.srv.idx.size
	e.srv.idx.mu.Unlock()
	if cached != 0 {
		t.Fatalf("index cache holds %d bytes under a budget of 0", cached)
	}
	bad := next
	bad.MaxWaitMs = 0
	if err := e.srv.Reconfigure(bad); err == nil || e.srv.conf().MaxWaitMs != 42 {
		t.Fatalf("invalid Reconfigure: %v, max wait %d", err, e.srv.conf().MaxWaitMs)
	}
}
