package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/proto/tierdpb"
)

// This file holds readers_N: N concurrent cold readers, sequential or at
// random offsets, against a "tierd run" child started afresh for each N
// (empty caches, its own peak memory).

// readTarget is the tierd the readers read from: a child process, or the
// in-process server when the bench has no tierd binary (tests).
type readTarget struct {
	client  *grpcapi.Client
	pid     int
	httpURL string // the child's http.listen; "" in process
	// metrics returns tierd's counters and gauges named in
	// readersMetricNames, each summed over its labels; nil when it cannot.
	metrics func() map[string]float64
	stop    func()
}

// readersMetricNames are the metrics a readers_N run reads from tierd:
// the bytes it read from the store (.log ranges and indexes) and the
// prefetched bytes no read has used (with loads in flight).
var readersMetricNames = []string{"tierd_fetch_log_bytes_total", "tierd_fetch_index_bytes_total", "tierd_cache_prefetch_bytes"}

// readersTarget starts a fresh tierd for one readers_N run.
func (e *env) readersTarget(ctx context.Context) (*readTarget, error) {
	if e.cfg.DaemonBin == "" {
		e.server.Engine().DropCaches(true)
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return &readTarget{client: e.client, pid: os.Getpid(), metrics: e.gatherSums, stop: func() {}}, nil
	}
	d, err := e.startDaemon(ctx, e.cfg.DaemonBin, e.cfg.ReadersMemoryLimit)
	if err != nil {
		return nil, err
	}
	return &readTarget{client: d.client, pid: d.cmd.Process.Pid, httpURL: d.httpURL, metrics: func() map[string]float64 { return scrapeSums(d.metricsURL) }, stop: d.stop}, nil
}

// gatherSums reads readersMetricNames from the in-process registry.
func (e *env) gatherSums() map[string]float64 { return gatherSums(e.reg) }

// gatherSums reads readersMetricNames from reg.
func gatherSums(reg prometheus.Gatherer) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !slices.Contains(readersMetricNames, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// scrapeSums reads readersMetricNames from a tierd's /metrics (Prometheus
// text format: "name{labels} value" lines).
func scrapeSums(url string) map[string]float64 { return scrapeNamed(url, readersMetricNames) }

// scrapeNamed reads the metrics named from a tierd's /metrics, each
// summed over its labels; nil when it cannot.
func scrapeNamed(url string, names []string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		if !slices.Contains(names, name) {
			continue
		}
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// fetchedBytes is the bytes tierd has read from the store, from m.
func fetchedBytes(m map[string]float64) float64 {
	return m["tierd_fetch_log_bytes_total"] + m["tierd_fetch_index_bytes_total"]
}

// settled waits until tierd's bytes read from the store stop growing
// (the loads the readers started have ended), polling every 100 ms for
// at most 10 s, and returns its metrics then (nil: unknown).
func settled(tg *readTarget) map[string]float64 {
	m := tg.metrics()
	for deadline := time.Now().Add(10 * time.Second); m != nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		next := tg.metrics()
		if next == nil || fetchedBytes(next) == fetchedBytes(m) {
			return next
		}
		m = next
	}
	return m
}

// anonSampler samples a process's anonymous resident memory every 5 ms
// (the kernel keeps no peak of it alone); stop returns the peak, MiB.
func anonSampler(pid int) (stop func() float64) {
	peak := procStatus(pid, "RssAnon")
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				peak = max(peak, procStatus(pid, "RssAnon"))
			}
		}
	}()
	return func() float64 { close(quit); <-done; return peak }
}

// readersCase runs readers_N for every N of cfg.ReaderCounts, sequential
// and random, cfg.Rounds times; each reader reads cfg.readerBytes(N).
func (e *env) readersCase(ctx context.Context) ([]*Series, error) {
	sizes, rounds := e.cfg.ReaderCounts, e.cfg.Rounds
	var out []*Series
	for _, pattern := range e.cfg.ReaderPatterns {
		ser := map[string]*Series{}
		for _, m := range readerMetrics {
			ser[m] = newSeries("readers", pattern, m, sizes, rounds, false)
			out = append(out, ser[m])
		}
		for r := range rounds {
			for i, n := range sizes {
				run := func() (readersOut, error) { return e.readersRun(ctx, pattern, n, uint64(r)) }
				if pattern == "broker" {
					run = func() (readersOut, error) { return e.brokerRun(ctx, n) }
				}
				o, err := run()
				if err != nil {
					return nil, fmt.Errorf("readers_%d %s: %w", n, pattern, err)
				}
				res := o.res
				res.finish()
				ratio, unread := -1.0, -1.0
				if o.fetched >= 0 && res.bytes > 0 {
					ratio, unread = o.fetched/float64(res.bytes), o.unread/float64(res.bytes)
				}
				gib := float64(res.bytes) / (1 << 30)
				perGiB := func(s float64) float64 {
					if s < 0 || gib == 0 {
						return -1
					}
					return s / gib
				}
				for k, v := range map[string]float64{"mib_per_s": res.MiBPerS, "p50_ms": res.P50 / 1000, "p99_ms": res.P99 / 1000,
					"mean_ms": res.hist.Mean() / 1000, "fetched_per_served": ratio, "unread_prefetch_per_served": unread, "peak_anon_rss_mib": o.peak,
					"tierd_cpu_s_per_gib": perGiB(o.cpu.tierd), "bench_cpu_s_per_gib": perGiB(o.cpu.bench), "store_cpu_s_per_gib": perGiB(o.cpu.store)} {
					if v >= 0 {
						ser[k].set(r, i, v)
					}
				}
				e.logf("readers_%d %s (round %d): %.0f MiB/s, p50 %.1f ms, p99 %.1f ms, %.2f bytes fetched per byte served (%.2f prefetched, unread), peak anonymous RSS %.0f MiB; CPU-s tierd %.2f, bench %.2f, store %.2f over %.1f s",
					n, pattern, r+1, res.MiBPerS, res.P50/1000, res.P99/1000, ratio, unread, o.peak, o.cpu.tierd, o.cpu.bench, o.cpu.store, res.wall.Seconds())
				if o.profErr != nil {
					e.logf("readers_%d %s (round %d): %v", n, pattern, r+1, o.profErr)
				}
			}
		}
	}
	return out, nil
}

// readerMetrics are the measures of readers_N, per pattern and N: the
// CPU seconds per GiB served are the tierd child's (the in-process
// server's are in the bench's), the bench process's (readers, answers
// compared byte for byte) and the store's, over the run.
var readerMetrics = []string{"mib_per_s", "p50_ms", "p99_ms", "mean_ms", "fetched_per_served", "unread_prefetch_per_served", "peak_anon_rss_mib",
	"tierd_cpu_s_per_gib", "bench_cpu_s_per_gib", "store_cpu_s_per_gib"}

// readersOut is one readers_N run's measures: the Fetches' latencies and
// bytes served (wall time set), the bytes tierd read from the store
// meanwhile and of them those prefetched and left unread (-1 unknown),
// its peak anonymous RSS (MiB), the CPU seconds
// of the processes involved, and what went wrong with the profiles
// (Config.ProfileDir), if anything.
type readersOut struct {
	res     *Result
	fetched float64
	unread  float64 // prefetched bytes no read used, once loads ended; -1 unknown
	peak    float64
	cpu     struct{ tierd, bench, store float64 } // -1 unknown
	profErr error
}

// readersRun is one readers_N run: n readers at once against a fresh
// tierd, each reading cfg.readerBytes(n) (sequential: from its own start,
// spread evenly over the log, wrapping at the end; random: Fetches at
// random offsets), every answer compared byte for byte with the local
// files.
func (e *env) readersRun(ctx context.Context, pattern string, n int, round uint64) (readersOut, error) {
	var o readersOut
	tg, err := e.readersTarget(ctx)
	if err != nil {
		return o, err
	}
	defer tg.stop()
	r := newResult(fmt.Sprintf("readers_%d", n))
	m0 := tg.metrics()
	c0, t0 := e.cpu(), -1.0
	if tg.httpURL != "" {
		t0 = cpuSeconds(tg.pid)
	}
	profiled := startReadProfile(e.cfg.ProfileDir, fmt.Sprintf("readers_%d_%s_r%d", n, pattern, round+1), tg.httpURL, e.cfg.ProfileSeconds)
	stop := anonSampler(tg.pid)
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
	per := e.cfg.readerBytes(n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := newResult("")
			rng := rand.New(rand.NewPCG(e.cfg.Seed+round, uint64(i)))
			off := first + (last-first+1)*int64(i)/int64(n)
			var err error
			for read := int64(0); read < per && err == nil; {
				if pattern == "random" {
					off = first + rng.Int64N(last-first+1)
				}
				var got int64
				got, off, err = e.readOne(ctx, tg.client, off, part)
				read += got
				if off > last {
					off = first
				}
			}
			mu.Lock()
			defer mu.Unlock()
			r.merge(part)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	o.res, o.peak = r, stop()
	c := e.cpu().sub(c0)
	o.cpu.bench, o.cpu.store, o.cpu.tierd = c.proc, c.store, -1
	if t1 := cpuSeconds(tg.pid); t0 >= 0 && t1 >= 0 {
		o.cpu.tierd = t1 - t0
	}
	o.profErr = profiled()
	if firstErr != nil {
		return o, firstErr
	}
	o.fetched, o.unread = -1, -1
	if m := settled(tg); m != nil && m0 != nil {
		o.fetched, o.unread = fetchedBytes(m)-fetchedBytes(m0), m["tierd_cache_prefetch_bytes"]
	}
	return o, nil
}

// readOne fetches offset (asking again on UNAVAILABLE), compares the
// answer byte for byte with the local files, and returns the bytes
// served and the next offset.
func (e *env) readOne(ctx context.Context, c *grpcapi.Client, off int64, r *Result) (int64, int64, error) {
	t := time.Now()
	resp, err := fetchRetry(ctx, c, &tierdpb.FetchRequest{Topic: topic, Offset: off, MaxBytes: e.cfg.MaxBytes}, r)
	r.add(time.Since(t), int64(len(resp.GetRecords())))
	if err != nil {
		return 0, off, fmt.Errorf("fetch at offset %d: %w", off, err)
	}
	s := e.expect(off)
	if err := check("readers", s, resp.Records, resp.NextOffset, e.maps[s.seg][s.pos:s.pos+s.len]); err != nil {
		return 0, off, err
	}
	return int64(len(resp.Records)), resp.NextOffset, nil
}
