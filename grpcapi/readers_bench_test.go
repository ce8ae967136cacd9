package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/seglog"
)

// readersLogBytes is the size of the log BenchmarkReaders reads: twice the
// default memory budget, so the cache must evict.
const readersLogBytes = 512 << 20

// readersRecordBytes is the value size of each record (one batch each).
const readersRecordBytes = 16 << 10

// benchEnvInt reads an integer override of a benchmark setting from the
// environment (the sweep that chose the defaults set them), or def.
func benchEnvInt(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// newReadersEnv tiers a log of about readersLogBytes into a real MinIO and
// returns an env whose server reads it (in process: ReadRemote).
func newReadersEnv(b *testing.B, cfg Config, reg prometheus.Registerer, read *atomic.Int64) *env {
	b.Helper()
	mb := readtest.MinIOBucket(b, "readers")
	var err error
	e := &env{Rig: &readtest.Rig{T: b, TP: remotelog.TopicPartition{Topic: "t"}}, t: b} // its Mgr over streamCounter, below
	if e.Store, err = rlmm.Open(rlmm.Config{Dir: "db"}, rlmm.WithFS(vfs.NewMem())); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Store.Close() })
	if e.Mgr, err = rsm.NewManager(&streamCounter{Bucket: mb, n: read}, rsm.Config{}); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "t-0")
	lcfg := seglog.DefaultConfig()
	lcfg.SegmentBytes = 64 << 20
	l, err := seglog.Open(dir, lcfg)
	if err != nil {
		b.Fatal(err)
	}
	val := bytes.Repeat([]byte{7}, readersRecordBytes)
	for i := int64(0); i < readersLogBytes/readersRecordBytes; i++ {
		if _, err := l.Append(seglog.Record{Value: val, Timestamp: 1_000_000 + i}); err != nil {
			b.Fatal(err)
		}
	}
	l.Roll()
	l.Close()
	e.Tier(dir)
	if e.srv, err = NewServer(cfg, e.Store, e.Mgr, WithRegisterer(reg)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.srv.Close)
	return e
}

// BenchmarkReaders runs N = 1, 8, 32 and 64 concurrent cold readers of one
// partition on a real MinIO, through Server.ReadRemote (max_bytes 1 MiB).
// Sequential readers each read their own 1/N of the log from its start;
// random readers make 256/N reads each at random offsets. Each op is one
// round with the chunk cache emptied first (indexes stay cached). It
// reports aggregate MiB/s, bytes fetched from the store per byte served,
// the p99 of one read (ms), and allocations per round; it asserts nothing
// about time. TIERD_BENCH_CHUNK, TIERD_BENCH_PREFETCH, TIERD_BENCH_GETS
// and TIERD_BENCH_MEMORY override the chunk size (bytes), prefetch depth
// (bytes), GETs in flight and memory budget (bytes); TIERD_BENCH_DEBUG
// logs each case's cache metrics. A sequential reader stops at the end of
// its share, so what was prefetched past it for bytes another reader read
// long before (and the cache evicted) counts as fetched: at N = 64 with
// 16 MiB chunks that tail is about 0.15-0.2 of the ratio
// (tierd_cache_prefetch_bytes still held at the round's end).
func BenchmarkReaders(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = benchEnvInt(b, "TIERD_BENCH_CHUNK", cfg.Cache.ChunkBytes)
	cfg.PrefetchBytes = benchEnvInt(b, "TIERD_BENCH_PREFETCH", cfg.PrefetchBytes)
	cfg.Cache.MaxInflightGets = int(benchEnvInt(b, "TIERD_BENCH_GETS", int64(cfg.Cache.MaxInflightGets)))
	cfg.Cache.MemoryBytes = benchEnvInt(b, "TIERD_BENCH_MEMORY", cfg.Cache.MemoryBytes)
	var read atomic.Int64
	e := newReadersEnv(b, cfg, prometheus.NewRegistry(), &read)
	fin, err := e.Store.FinishedSegments(e.TP)
	if err != nil || len(fin) == 0 {
		b.Fatalf("no finished copies: %v", err)
	}
	lastOffset := fin[len(fin)-1].EndOffset
	for _, mode := range []string{"seq", "rand"} {
		for _, n := range []int{1, 8, 32, 64} {
			b.Run(fmt.Sprintf("%s/N=%d", mode, n), func(b *testing.B) { readersCase(b, e, e.srv, mode, n, lastOffset, &read) })
		}
	}
}

// BenchmarkReadersSweep is the sweep that chose the defaults of chunk
// size, prefetch depth and prefetch GETs per reader: BenchmarkReaders'
// rounds (8 and 64 sequential readers, 32 random ones) for each
// combination, on one MinIO data set.
func BenchmarkReadersSweep(b *testing.B) {
	var read atomic.Int64
	e := newReadersEnv(b, DefaultConfig(), prometheus.NewRegistry(), &read)
	fin, err := e.Store.FinishedSegments(e.TP)
	if err != nil || len(fin) == 0 {
		b.Fatalf("no finished copies: %v", err)
	}
	lastOffset := fin[len(fin)-1].EndOffset
	for _, chunk := range sweepInts(b, "TIERD_BENCH_SWEEP_CHUNKS", 4<<20, 8<<20, 16<<20) {
		for _, depth := range sweepInts(b, "TIERD_BENCH_SWEEP_DEPTHS", 16<<20, 64<<20) {
			for _, gets := range sweepInts(b, "TIERD_BENCH_SWEEP_GETS", 1, 2, 4) {
				cfg := DefaultConfig()
				cfg.Cache.ChunkBytes, cfg.PrefetchBytes, cfg.PrefetchGets = chunk, depth, int(gets)
				srv, err := NewServer(cfg, e.Store, e.Mgr, WithRegisterer(prometheus.NewRegistry()))
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range []struct {
					mode string
					n    int
				}{{"seq", 8}, {"seq", 64}, {"rand", 32}} {
					name := fmt.Sprintf("chunk=%dMiB/prefetch=%dMiB/gets=%d/%s/N=%d", chunk>>20, depth>>20, gets, c.mode, c.n)
					b.Run(name, func(b *testing.B) { readersCase(b, e, srv, c.mode, c.n, lastOffset, &read) })
				}
				srv.Close()
			}
		}
	}
}

// readersCase runs b.N rounds of n readers of one mode on srv and
// reports aggregate MiB/s, bytes fetched per byte served (read counts
// the bytes of GET bodies), the p99 of one read in ms, remoteread.ErrStillLoading
// retries per read, and allocations per round.
func readersCase(b *testing.B, e *env, srv *Server, mode string, n int, lastOffset int64, read *atomic.Int64) {
	var served, fetched int64
	var retries atomic.Int64
	var lat []time.Duration
	var elapsed time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv.Engine().DropCaches(false)
		before := read.Load()
		b.StartTimer()
		start := time.Now()
		s, l := readersRound(b, srv, e.TP, mode, n, lastOffset, int64(i), &retries)
		elapsed += time.Since(start)
		b.StopTimer()
		srv.Engine().Settle()
		fetched += read.Load() - before
		served += s
		lat = append(lat, l...)
		b.StartTimer()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if os.Getenv("TIERD_BENCH_DEBUG") != "" {
		if reg, ok := srv.reg.(prometheus.Gatherer); ok {
			mfs, _ := reg.Gather()
			for _, mf := range mfs {
				if strings.HasPrefix(mf.GetName(), "tierd_cache_") {
					for _, m := range mf.Metric {
						b.Logf("%s %v %v", mf.GetName(), m.GetLabel(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
					}
				}
			}
		}
	}
	b.ReportMetric(float64(served)/(1<<20)/elapsed.Seconds(), "MiB/s")
	b.ReportMetric(float64(fetched)/float64(served), "fetched/served")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(retries.Load())/float64(len(lat)), "retries/read")
}

// readersRound runs one round of n readers and returns the bytes served
// and each read's latency (retries of remoteread.ErrStillLoading included).
func readersRound(b *testing.B, srv *Server, tp remotelog.TopicPartition, mode string, n int, lastOffset, seed int64, retries *atomic.Int64) (int64, []time.Duration) {
	var served atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	span := (lastOffset + 1) / int64(n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(r)))
			var mine []time.Duration
			read := func(off int64) (int64, bool) {
				t := time.Now()
				rr, err := srv.Engine().ReadRemote(context.Background(), tp, off, 1<<20)
				for errors.Is(err, remoteread.ErrStillLoading) { // a consumer retries (UNAVAILABLE over gRPC)
					retries.Add(1)
					rr, err = srv.Engine().ReadRemote(context.Background(), tp, off, 1<<20)
				}
				if err != nil {
					b.Errorf("read %d: %v", off, err)
					return 0, false
				}
				mine = append(mine, time.Since(t))
				served.Add(int64(len(rr.Records)))
				return rr.Next, len(rr.Records) > 0
			}
			if mode == "seq" {
				for off, end := int64(r)*span, int64(r+1)*span; off < end; {
					next, ok := read(off)
					if !ok {
						break
					}
					off = next
				}
			} else {
				for k := 0; k < 256/n; k++ {
					read(rng.Int64N(lastOffset + 1))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(r)
	}
	wg.Wait()
	return served.Load(), lat
}

// streamCounter counts the bytes read from GET bodies as they are read
// (countingBucket buffers whole bodies, which would hide how a load fills
// its chunk).
type streamCounter struct {
	rsm.Bucket
	n *atomic.Int64
}

func (c *streamCounter) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := c.Bucket.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return countedBody{rc, c.n}, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// sweepInts returns the comma-separated integers of the environment
// variable name, or def.
func sweepInts(b *testing.B, name string, def ...int64) []int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			b.Fatalf("%s=%q: %v", name, v, err)
		}
		out = append(out, n)
	}
	return out
}
