package remoteread

import (
	"bytes"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/seglog"
)

// shortCopiesLog writes partition tp of e a log of n copies of about 1
// MiB (5000-byte records, one to a batch) and tiers it.
func shortCopiesLog(t *testing.T, e *env, n int) []remotelog.SegmentMetadata {
	t.Helper()
	dir := t.TempDir()
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < int64(n)*207+10; i++ {
		if _, err := l.Append(seglog.Record{Value: bytes.Repeat([]byte{byte(i)}, 5000), Timestamp: 1_000_000 + i}); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	l.Close()
	e.Tier(dir)
	fin, err := e.Store.FinishedSegments(e.TP)
	if err != nil || len(fin) < n {
		t.Fatalf("%d copies tiered (%v), want %d", len(fin), err, n)
	}
	return fin
}

// shortReadersConfig is the readers_N bench's tierd scaled down 32 times
// (16 MiB chunks, 64 MiB read-ahead, 128 MiB of memory, 1 MiB Fetches,
// 32 MiB segments): 128 KiB chunks (so that the least a load takes is a
// Fetch's bytes, as there), 2 MiB read-ahead, 4 MiB of memory (half the
// log), 32 KiB Fetches, 1 MiB copies.
func shortReadersConfig() Config {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 128 << 10
	cfg.Cache.MemoryBytes = 4 << 20
	cfg.Cache.PrefetchBudgetBytes = 2 << 20
	cfg.PrefetchBytes = 2 << 20
	cfg.MaxWaitMs = 600000
	return cfg
}

// Sequential readers that stop after a few Fetches, the readers_N
// bench's case at its default sizes scaled down: 8 readers at once, each
// from the start of its own copy, reading 160 KiB (a sixth of it), and
// one reader reading a copy and a little of the next. Read-ahead is
// bounded by what each reader has taken, so the store is asked for at
// most 1.2 bytes per byte served (1.15 and 1.07 here); whole-chunk
// read-ahead to remote.fetch.prefetch.max.bytes asked for 2.8 (8 readers)
// and 1.4 (one reader).
func TestShortSequentialReadersFetchLittleMore(t *testing.T) {
	for _, tc := range []struct {
		readers int
		each    int64
	}{{8, 160 << 10}, {1, 1100 << 10}} {
		reg := prometheus.NewRegistry()
		e := newEnv(t, shortReadersConfig(), WithRegisterer(reg))
		fin := shortCopiesLog(t, e, 8)
		ratio := fetchedPerServed(t, e, reg, func() {
			var wg sync.WaitGroup
			for i := range tc.readers {
				wg.Add(1)
				go func() { defer wg.Done(); readShare(t, e, e.TP, fin[i].StartOffset, tc.each, 32<<10) }()
			}
			wg.Wait()
		})
		t.Logf("%d sequential readers of %d bytes each: %.3f bytes fetched per byte served", tc.readers, tc.each, ratio)
		if ratio > 1.2 {
			t.Errorf("%d sequential readers of %d bytes each: %.3f bytes fetched per byte served, want <= 1.2", tc.readers, tc.each, ratio)
		}
	}
}
