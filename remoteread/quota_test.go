package remoteread

import (
	"context"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/testutil/readtest"
)

// TestFetchQuota reads the 3 MiB reference log from the store under a
// 1 MiB/s fetch quota (remote.log.manager.fetch.max.bytes.per.second),
// set by Reconfigure on an engine started without one: about three seconds,
// and the bytes read from the store over the time taken stay at the
// limit.
func TestFetchQuota(t *testing.T) {
	const limit = 1 << 20
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 20000 // reads wait for throttled loads instead of answering UNAVAILABLE
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	next := cfg
	next.FetchMaxBytesPerSecond = limit
	if err := e.eng.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := e.Bucket.Read.Load()
	start := time.Now()
	for off := int64(0); off < 600; {
		rr, err := e.eng.ReadRemote(ctx, e.TP, off, 256<<10)
		if err != nil {
			t.Fatalf("ReadRemote(%d): %v", off, err)
		}
		off = rr.Next
	}
	e.eng.Settle() // prefetches in flight count too
	read := e.Bucket.Read.Load() - before
	rate := float64(read) / time.Since(start).Seconds()
	ratio := rate / limit
	t.Logf("read %d bytes from the store at %.0f bytes/s: %.3f of the limit", read, rate, ratio)
	if read < 3_000_000 {
		t.Fatalf("read %d bytes from the store, want the whole log (about 3 MB)", read)
	}
	// The quota's promise is the upper bound; a loaded machine may read
	// slower than the limit. The lower side: reading the whole log took at
	// least a quarter of the time its bytes take at the limit, so the
	// limiter did hold reads back.
	if ratio > 1.2 {
		t.Fatalf("fetch rate %.0f bytes/s is %.2fx the quota %d; want at most 1.2x", rate, ratio, limit)
	}
	if min := time.Duration(float64(read) / limit / 4 * float64(time.Second)); time.Since(start) < min {
		t.Fatalf("read %d bytes in %s, faster than a quarter of the time at the quota (%s)", read, time.Since(start), min)
	}
}

// TestReconfigure: the dynamic settings change for the requests that
// follow, a smaller index cache budget evicts at once, the static ones
// stay, and an invalid config changes nothing.
func TestReconfigure(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	if _, err := e.eng.ReadRemote(context.Background(), e.TP, 0, 1); err != nil {
		t.Fatal(err)
	}
	cached := e.eng.IndexCacheBytes()
	if cached == 0 {
		t.Fatal("no index cached after a read")
	}
	next := DefaultConfig()
	next.MaxWaitMs, next.IndexCacheBytes, next.Cache.ChunkBytes = 42, 0, 1<<20
	if err := e.eng.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	c := e.eng.Config()
	if c.MaxWaitMs != 42 || c.Cache.ChunkBytes != e.eng.cfg.Cache.ChunkBytes {
		t.Fatalf("after Reconfigure: max wait %d (want 42), chunk %d (want the static one kept)", c.MaxWaitMs, c.Cache.ChunkBytes)
	}
	cached = e.eng.IndexCacheBytes()
	if cached != 0 {
		t.Fatalf("index cache holds %d bytes under a budget of 0", cached)
	}
	bad := next
	bad.MaxWaitMs = 0
	if err := e.eng.Reconfigure(bad); err == nil || e.eng.Config().MaxWaitMs != 42 {
		t.Fatalf("invalid Reconfigure: %v, max wait %d", err, e.eng.Config().MaxWaitMs)
	}
}
