package grpcapi

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
)

// TestBufferReuseOnServingPaths: the chunk cache's pooled buffers are
// reused on the serving paths, and never while an answer still refers to
// them. With a memory budget of a few chunks, so that chunks are evicted
// and their buffers refilled with other chunks' bytes all the time:
//   - unary gRPC Fetches (multi-slice replies, views of the chunks) and
//     FetchStreams, from concurrent readers, random and sequential,
//     answer exactly the local log's bytes (a buffer reused before gRPC
//     wrote it would show other bytes); afterwards buffers were reused
//     (tierd_cache_buffer_reuses_total > 0) and no Pin is left;
//   - ReadRemote answers, kept while the cache churns on, still hold the
//     log's bytes at the end (ReadRemote copies; a slice of a pooled
//     chunk would have been overwritten).
//
// Run with -race: a buffer refilled under a reader is also a data race.
func TestBufferReuseOnServingPaths(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	cfg.Cache.MemoryBytes = 6 * cfg.Cache.ChunkBytes
	cfg.Cache.PrefetchBudgetBytes = 2 * cfg.Cache.ChunkBytes
	cfg.PrefetchBytes = 2 * cfg.Cache.ChunkBytes
	cfg.MaxWaitMs = 30_000 // whole answers: each is compared byte for byte
	reg := prometheus.NewRegistry()
	e := newEnv(t, cfg, WithRegisterer(reg))
	rng := rand.New(rand.NewSource(7))
	ref, hto := variedLog(t, e, rng, 200)
	defer ref.Close()
	ctx := context.Background()
	const readers, rounds = 4, 30

	type answer struct {
		off, mb int64
		got     []byte
	}
	check := func(what string, off int64, mb int, got []byte) {
		want, err := ref.Read(off, mb)
		if err != nil {
			t.Errorf("reference read %d/%d: %v", off, mb, err)
			return
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s %d/%d: %d bytes differ from the log's %d", what, off, mb, len(got), len(want))
		}
	}
	// run starts readers that each read rounds answers, some sequentially
	// (so that prefetch loads whole chunks), and with keep set also reads
	// by ReadRemote and keeps those answers.
	run := func(keep bool) []answer {
		var mu sync.Mutex
		var kept []answer
		var wg sync.WaitGroup
		for r := 0; r < readers; r++ {
			rng := rand.New(rand.NewSource(int64(100 + r)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				off := rng.Int63n(hto + 1)
				for i := 0; i < rounds && !t.Failed(); i++ {
					mb := 1 + rng.Intn(200<<10)
					req := &tierdpb.FetchRequest{Topic: e.TP.Topic, Partition: e.TP.Partition, Offset: off, MaxBytes: int32(mb)}
					var next int64
					switch {
					case keep && i%2 == 0:
						rr, err := e.srv.Engine().ReadRemote(ctx, e.TP, off, mb)
						if err != nil {
							t.Errorf("ReadRemote %d/%d: %v", off, mb, err)
							return
						}
						mu.Lock()
						kept = append(kept, answer{off, int64(mb), rr.Records})
						mu.Unlock()
						next = rr.Next
					case i%2 == 0:
						u, err := e.api.Fetch(ctx, req)
						if err != nil {
							t.Errorf("Fetch %d/%d: %v", off, mb, err)
							return
						}
						check("Fetch", off, mb, u.Records)
						next = u.NextOffset
					default:
						recs, n, _, err := e.fetchStream(ctx, req)
						if err != nil {
							t.Errorf("FetchStream %d/%d: %v", off, mb, err)
							return
						}
						check("FetchStream", off, mb, recs)
						next = n
					}
					if next > hto || rng.Intn(4) == 0 {
						next = rng.Int63n(hto + 1) // jump: a cold, random read
					}
					off = next
				}
			}()
		}
		wg.Wait()
		return kept
	}

	run(false)
	waitUnpinned(t, e)
	reused := readtest.MetricValue(t, reg, "tierd_cache_buffer_reuses_total")
	if reused == 0 {
		t.Fatal("no chunk buffer was reused after unary Fetches and FetchStreams")
	}
	if loaded := readtest.MetricValue(t, reg, "tierd_cache_loaded_bytes_total"); loaded <= float64(6*cfg.Cache.ChunkBytes) {
		t.Fatalf("%v bytes loaded: the test does not make the cache evict", loaded)
	}

	kept := run(true)
	e.srv.Engine().Settle()
	if len(kept) == 0 {
		t.Fatal("no ReadRemote answer kept")
	}
	for _, a := range kept { // after all the churn since each was answered
		check("kept ReadRemote", a.off, int(a.mb), a.got)
	}
	waitUnpinned(t, e)
	if readtest.MetricValue(t, reg, "tierd_cache_buffer_reuses_total") <= reused {
		t.Fatal("no chunk buffer reused while ReadRemote answers were kept")
	}
	t.Logf("%v buffer reuses", readtest.MetricValue(t, reg, "tierd_cache_buffer_reuses_total"))
}
