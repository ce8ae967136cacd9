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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/proto/tierdpb"
)

// This file holds readers_N: N concurrent cold readers, sequential or at
// random offsets, against a "tierd run" child started afresh for each N
// (empty caches, its own peak memory).

// readTarget is the tierd the readers read from: a child process, or the
// in-process server when the bench has no tierd binary (tests).
type readTarget struct {
	client  *fetch.Client
	pid     int
	httpURL string         // the child's http.listen; "" in process
	fetched func() float64 // bytes tierd has read from the store so far
	stop    func()
}

// readersTarget starts a fresh tierd for one readers_N run.
func (e *env) readersTarget(ctx context.Context) (*readTarget, error) {
	if e.cfg.DaemonBin == "" {
		e.server.DropCaches(true)
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return &readTarget{client: e.client, pid: os.Getpid(), fetched: func() float64 { return e.fetchedBytes() }, stop: func() {}}, nil
	}
	d, err := e.startDaemon(ctx, e.cfg.DaemonBin)
	if err != nil {
		return nil, err
	}
	return &readTarget{client: d.client, pid: d.cmd.Process.Pid, httpURL: d.httpURL, fetched: func() float64 { return scrapeFetched(d.metricsURL) }, stop: d.stop}, nil
}

// fetchedBytes is the bytes the in-process fetch server has read from the
// store (.log ranges and indexes).
func (e *env) fetchedBytes() float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "tierd_fetch_log_bytes_total" || mf.GetName() == "tierd_fetch_index_bytes_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// scrapeFetched reads the same two counters from a tierd's /metrics
// (Prometheus text format: "name{labels} value" lines); -1 when it
// cannot.
func scrapeFetched(url string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "tierd_fetch_log_bytes_total") && !strings.HasPrefix(line, "tierd_fetch_index_bytes_total") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			n += v
		}
	}
	return n
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
// and random, cfg.Rounds times; each reader reads cfg.ReaderBytes.
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
				o, err := e.readersRun(ctx, pattern, n, uint64(r))
				if err != nil {
					return nil, fmt.Errorf("readers_%d %s: %w", n, pattern, err)
				}
				res := o.res
				res.finish()
				ratio := -1.0
				if o.fetched >= 0 && res.bytes > 0 {
					ratio = o.fetched / float64(res.bytes)
				}
				gib := float64(res.bytes) / (1 << 30)
				perGiB := func(s float64) float64 {
					if s < 0 || gib == 0 {
						return -1
					}
					return s / gib
				}
				for k, v := range map[string]float64{"mib_per_s": res.MiBPerS, "p50_ms": res.P50 / 1000, "p99_ms": res.P99 / 1000,
					"mean_ms": res.hist.Mean() / 1000, "fetched_per_served": ratio, "peak_anon_rss_mib": o.peak,
					"tierd_cpu_s_per_gib": perGiB(o.cpu.tierd), "bench_cpu_s_per_gib": perGiB(o.cpu.bench), "store_cpu_s_per_gib": perGiB(o.cpu.store)} {
					if v >= 0 {
						ser[k].set(r, i, v)
					}
				}
				e.logf("readers_%d %s (round %d): %.0f MiB/s, p50 %.1f ms, p99 %.1f ms, %.2f bytes fetched per byte served, peak anonymous RSS %.0f MiB; CPU-s tierd %.2f, bench %.2f, store %.2f over %.1f s",
					n, pattern, r+1, res.MiBPerS, res.P50/1000, res.P99/1000, ratio, o.peak, o.cpu.tierd, o.cpu.bench, o.cpu.store, res.wall.Seconds())
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
var readerMetrics = []string{"mib_per_s", "p50_ms", "p99_ms", "mean_ms", "fetched_per_served", "peak_anon_rss_mib",
	"tierd_cpu_s_per_gib", "bench_cpu_s_per_gib", "store_cpu_s_per_gib"}

// readersOut is one readers_N run's measures: the Fetches' latencies and
// bytes served (wall time set), the bytes tierd read from the store
// meanwhile (-1 unknown), its peak anonymous RSS (MiB), the CPU seconds
// of the processes involved, and what went wrong with the profiles
// (Config.ProfileDir), if anything.
type readersOut struct {
	res     *Result
	fetched float64
	peak    float64
	cpu     struct{ tierd, bench, store float64 } // -1 unknown
	profErr error
}

// readersRun is one readers_N run: n readers at once against a fresh
// tierd, each reading cfg.ReaderBytes (sequential: from its own start,
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
	f0 := tg.fetched()
	c0, t0 := e.cpu(), -1.0
	if tg.httpURL != "" {
		t0 = cpuSeconds(tg.pid)
	}
	profiled := startReadProfile(e.cfg.ProfileDir, fmt.Sprintf("readers_%d_%s_r%d", n, pattern, round+1), tg.httpURL, e.cfg.ProfileSeconds)
	stop := anonSampler(tg.pid)
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
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
			for read := int64(0); read < e.cfg.ReaderBytes && err == nil; {
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
	if o.fetched = tg.fetched(); o.fetched >= 0 && f0 >= 0 {
		o.fetched -= f0
	} else {
		o.fetched = -1
	}
	return o, nil
}

// readOne fetches offset (asking again on UNAVAILABLE), compares the
// answer byte for byte with the local files, and returns the bytes
// served and the next offset.
func (e *env) readOne(ctx context.Context, c *fetch.Client, off int64, r *Result) (int64, int64, error) {
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
