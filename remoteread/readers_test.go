package remoteread

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
)

// fetchedPerServed runs fn and returns the .log bytes GETs asked for per
// byte the reads served (tierd_fetch_log_bytes_total over
// tierd_fetch_served_bytes_total), after the loads fn started ended.
func fetchedPerServed(t *testing.T, e *env, reg *prometheus.Registry, fn func()) float64 {
	t.Helper()
	fetched0, served0 := readtest.MetricValue(t, reg, "tierd_fetch_log_bytes_total"), readtest.MetricValue(t, reg, "tierd_fetch_served_bytes_total")
	fn()
	e.eng.Settle()
	fetched, served := readtest.MetricValue(t, reg, "tierd_fetch_log_bytes_total")-fetched0, readtest.MetricValue(t, reg, "tierd_fetch_served_bytes_total")-served0
	if served == 0 {
		t.Fatal("nothing served")
	}
	return fetched / served
}

// readOn reads partition tp from offset from to the end of the tiered
// log, as a consumer does, retrying answers still loading.
func readOn(t *testing.T, e *env, tp remotelog.TopicPartition, from int64, maxBytes int) {
	for off := from; ; {
		rr, err := e.eng.ReadRemote(context.Background(), tp, off, maxBytes)
		if errors.Is(err, ErrStillLoading) {
			continue
		}
		if err != nil {
			t.Errorf("read %s at %d: %v", tp, off, err)
			return
		}
		if len(rr.Records) == 0 || rr.Next > rr.Offsets.HighestTieredOffset {
			return
		}
		off = rr.Next
	}
}

// Eight sequential readers, each of its own partition, with read-ahead
// and a memory budget far smaller than the data: the store is asked for
// at most 1.2 bytes per byte served (prefetch shares one budget, its
// chunks are evicted last, and a read going on past a cached part loads
// the rest only).
func TestSequentialReadersFetchLittleExtra(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.MemoryBytes = 1 << 20
	cfg.Cache.PrefetchBudgetBytes = 256 << 10
	cfg.PrefetchBytes = 192 << 10
	reg := prometheus.NewRegistry()
	e := newEnv(t, cfg, WithRegisterer(reg))
	for p := int32(0); p < 8; p++ {
		e.TP.Partition = p
		readtest.ReferenceLog(t, e.Rig)
	}
	ratio := fetchedPerServed(t, e, reg, func() {
		var wg sync.WaitGroup
		for p := int32(0); p < 8; p++ {
			wg.Add(1)
			go func() { defer wg.Done(); readOn(t, e, remotelog.TopicPartition{Topic: "t", Partition: p}, 0, 20000) }()
		}
		wg.Wait()
	})
	t.Logf("8 sequential readers: %.3f bytes fetched per byte served", ratio)
	if ratio > 1.2 {
		t.Fatalf("8 sequential readers: %.3f bytes fetched per byte served, want <= 1.2", ratio)
	}
	held, most := e.eng.Cache().PrefetchHeld()
	if most == 0 || most > 256<<10 {
		t.Fatalf("prefetch budget peaked at %d bytes (now %d), want some and at most %d", most, held, 256<<10)
	}
}

// Random readers are not read ahead for, and a read in a chunk part of
// which is cached loads about its own bytes, not the whole chunk: with
// about two reads per chunk, the store is asked for under 2 bytes per
// byte served (whole-chunk loads would ask for several times that).
// Reads of 64 KiB, a quarter chunk, so that the least a load takes is
// about what a read asks.
func TestRandomReadersFetchTheirOwnBytes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 256 << 10
	reg := prometheus.NewRegistry()
	e := newEnv(t, cfg, WithRegisterer(reg))
	readtest.ReferenceLog(t, e.Rig)
	ratio := fetchedPerServed(t, e, reg, func() {
		var wg sync.WaitGroup
		for r := 0; r < 8; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for k := 0; k < 3; k++ {
					off := rng.Int64N(590)
					if _, err := e.eng.ReadRemote(context.Background(), e.TP, off, 64<<10); err != nil && !errors.Is(err, ErrStillLoading) {
						t.Errorf("read %d: %v", off, err)
					}
				}
			}()
		}
		wg.Wait()
	})
	t.Logf("8 random readers: %.3f bytes fetched per byte served", ratio)
	if ratio > 2 {
		t.Fatalf("8 random readers: %.3f bytes fetched per byte served, want < 2", ratio)
	}
	if n := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"); n > 2 {
		t.Fatalf("%v prefetches for random readers", n)
	}
}

// Config.Validate reports the prefetch settings with the others.
func TestConfigValidatePrefetch(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.PrefetchGets, cfg.PrefetchBytes, cfg.Cache.PrefetchBudgetBytes = 0, -1, -1
	err := cfg.Validate()
	for _, want := range []string{"remote.fetch.prefetch.gets 0", "remote.fetch.prefetch.max.bytes -1", "remote.fetch.prefetch.budget.bytes -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// A read that starts where another reader's read ended (a random read
// landing there by chance) continues that chain once, which takes no
// read-ahead; the chain's next read on does. Measured against the same
// reads with prefetch off: the chance continuation asks the store for
// the same bytes, the read after it for more (its window taken along).
func TestChanceContinuationStartsNoReadAhead(t *testing.T) {
	fetched := func(prefetch int64) [3]int64 {
		cfg := DefaultConfig()
		cfg.Cache.ChunkBytes = 64 << 10 // a read's own bytes are more than the least a load takes (16 KiB)
		cfg.PrefetchBytes = prefetch
		e := newEnv(t, cfg)
		readtest.ReferenceLog(t, e.Rig)
		var out [3]int64
		next := int64(100)
		for k := range out { // reader A; B lands on A's end; B reads on
			before := e.Bucket.Read.Load()
			for {
				rr, err := e.eng.ReadRemote(context.Background(), e.TP, next, 40000)
				if errors.Is(err, ErrStillLoading) {
					continue
				}
				if err != nil {
					t.Fatalf("read %d: %v", next, err)
				}
				next = rr.Next
				break
			}
			e.eng.Settle()
			out[k] = e.Bucket.Read.Load() - before
		}
		return out
	}
	off, on := fetched(0), fetched(DefaultConfig().PrefetchBytes)
	t.Logf("bytes fetched by each read, prefetch off %v, on %v", off, on)
	if on[0] != off[0] || on[1] != off[1] {
		t.Fatalf("a first read and a chance continuation fetched %v with prefetch on, %v with it off: want no read-ahead", on[:2], off[:2])
	}
	if on[2] <= off[2] {
		t.Fatalf("the chain's second continuation fetched %d bytes with prefetch on, %d with it off: want its read-ahead too", on[2], off[2])
	}
}

// crowdedConfig is a cache scaled down from tierd's defaults as the
// readers_N bench runs them (16 MiB chunks, 64 MiB read-ahead, a 128 MiB
// memory budget): 64 KiB chunks, 256 KiB read-ahead, 512 KiB of memory,
// so that the memory budget holds eight chunks.
func crowdedConfig() Config {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.MemoryBytes = 512 << 10
	cfg.PrefetchBytes = 256 << 10
	return cfg
}

// readShare reads n bytes of partition tp from offset from on, as a
// consumer does, going on from the log start after its end (as the
// readers_N bench's sequential readers do), retrying answers still
// loading.
func readShare(t *testing.T, e *env, tp remotelog.TopicPartition, from, n int64, maxBytes int) {
	for off, read := from, int64(0); read < n; {
		rr, err := e.eng.ReadRemote(context.Background(), tp, off, maxBytes)
		if errors.Is(err, ErrStillLoading) {
			continue
		}
		if err != nil {
			t.Errorf("read %s at %d: %v", tp, off, err)
			return
		}
		read += int64(len(rr.Records))
		if off = rr.Next; off > rr.Offsets.HighestTieredOffset {
			off = rr.Offsets.LogStartOffset
		}
	}
}

// More sequential readers than the memory budget holds chunks for (32
// readers, each of its own partition, against a budget of eight chunks):
// the cache is crowded, so few whole chunks are read ahead (at most a
// quarter of the chunks read; main read ahead about half of them) and
// the store is asked for at most 1.3 bytes per byte served. On the
// filesystem bucket, whose loads end at once, main's read-ahead cost
// only about 1.2 here (the readers_N bench's 3.2 needs a store with
// latency); this test pins the crowded behaviour by counts.
func TestCrowdedSequentialReadersFetchTheirOwnBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, crowdedConfig(), WithRegisterer(reg))
	const readers = 32
	for p := int32(0); p < readers; p++ {
		e.TP.Partition = p
		readtest.ReferenceLog(t, e.Rig)
	}
	ratio := fetchedPerServed(t, e, reg, func() {
		var wg sync.WaitGroup
		for p := int32(0); p < readers; p++ {
			wg.Add(1)
			go func() { defer wg.Done(); readOn(t, e, remotelog.TopicPartition{Topic: "t", Partition: p}, 0, 48<<10) }()
		}
		wg.Wait()
	})
	t.Logf("%d sequential readers: %.3f bytes fetched per byte served, %v prefetches", readers, ratio, readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"))
	if ratio > 1.3 {
		t.Fatalf("%d sequential readers: %.3f bytes fetched per byte served, want <= 1.3", readers, ratio)
	}
	if n := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"); n > readers*46/4 {
		t.Fatalf("%d crowded sequential readers: %v whole chunks read ahead, want at most a quarter of the %d read", readers, n, readers*46)
	}
}

// One sequential reader under the same budgets is not crowded: it reads
// whole chunks ahead (prefetches happen) and the store is asked for
// about one byte per byte served.
func TestLoneSequentialReaderReadsAhead(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, crowdedConfig(), WithRegisterer(reg))
	readtest.ReferenceLog(t, e.Rig)
	ratio := fetchedPerServed(t, e, reg, func() { readOn(t, e, e.TP, 0, 20000) })
	prefetches := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total")
	t.Logf("1 sequential reader: %.3f bytes fetched per byte served, %v prefetches", ratio, prefetches)
	if ratio > 1.05 {
		t.Fatalf("1 sequential reader: %.3f bytes fetched per byte served, want <= 1.05", ratio)
	}
	// The log is about 46 chunks; read-ahead loads most of them.
	if prefetches < 30 {
		t.Fatalf("1 sequential reader: %v prefetches, want most of the log's chunks read ahead", prefetches)
	}
}

// Two consumers reading the same partition from the same offset in step
// (two consumer groups catching up together: their fetches end at the
// same positions, and each fetch of one comes between two of the other)
// are sequential readers: read-ahead starts for them, as it does for one.
func TestLockstepReadersReadAhead(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, crowdedConfig(), WithRegisterer(reg))
	readtest.ReferenceLog(t, e.Rig)
	read := func(off int64) int64 {
		t.Helper()
		for {
			rr, err := e.eng.ReadRemote(context.Background(), e.TP, off, 20000)
			if errors.Is(err, ErrStillLoading) {
				continue
			}
			if err != nil {
				t.Fatalf("read %d: %v", off, err)
			}
			return rr.Next
		}
	}
	for a, b := int64(0), int64(0); a < 200; {
		a = read(a)
		b = read(b)
		if a != b {
			t.Fatalf("readers apart: %d, %d", a, b)
		}
	}
	e.eng.Settle()
	if n := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"); n == 0 {
		t.Fatal("two sequential readers in step: no read-ahead")
	}
}
