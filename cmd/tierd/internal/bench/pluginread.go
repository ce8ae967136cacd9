package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// This file holds the plugin case's reads: the cold, warm and raw reads
// of each round's new copies, and plugin_readers.

// pluginMetricNames are the tierd child's metrics the reads look at: the
// bytes and GETs it read from the store, the prefetched bytes no read
// has used, and the bytes the RSM endpoint answered reads with.
var pluginMetricNames = []string{"tierd_fetch_log_bytes_total", "tierd_fetch_index_bytes_total", "tierd_fetch_log_gets_total",
	"tierd_cache_prefetch_bytes", "tierd_rsm_fetch_bytes_total"}

// reads are the timed reads of one round, or of all.
type reads struct {
	raw, cold, warm *Result
	samples         int
	gets, fetched   float64 // tierd's GETs and bytes read from the store over the cold and warm reads
}

func newReads() *reads {
	return &reads{raw: newResult("jvm_raw_get"), cold: newResult("plugin_fetch_cold"), warm: newResult("plugin_fetch_warm")}
}

// ratio is x's MiB/s over the raw GET's (over their summed latencies).
func (r *reads) ratio(x *Result) (float64, bool) {
	if x.busy <= 0 || r.raw.busy <= 0 || r.raw.bytes == 0 {
		return 0, false
	}
	return (float64(x.bytes) / x.busy.Seconds()) / (float64(r.raw.bytes) / r.raw.busy.Seconds()), true
}

func (r *reads) merge(o *reads) {
	r.raw.merge(o.raw)
	r.cold.merge(o.cold)
	r.warm.merge(o.warm)
	r.samples += o.samples
	r.gets += o.gets
	r.fetched += o.fetched
}

// notes says what the store was asked for the cold and warm reads.
func (r *reads) notes() {
	if r.samples == 0 {
		return
	}
	n := float64(r.samples)
	r.cold.Note = fmt.Sprintf("%d reads, each of a chunk nothing of which was read before; tierd made %.2f GETs per read (cold and warm together: 1 means none for the warm read) and fetched %.2f bytes per byte the cold read served",
		r.samples, r.gets/n, r.fetched/max(float64(r.cold.bytes), 1))
	r.warm.Note = "the same reads again, right after"
	r.raw.Note = "ranged GETs of the same bytes of the same objects, presigned URLs, from the plugin's JVM read as the plugin reads a window (HttpURLConnection)"
}

// coldRead is one read of the cold, warm and raw reads: a copy and the
// byte range.
type coldRead struct {
	c      pluginCopy
	url    string
	pos, n int64
}

// coldReads reads each chunk of copies once, cold, then warm, beside a
// raw GET of the same bytes (see the file comment of plugin.go), into rr.
func (p *pluginRun) coldReads(ctx context.Context, cs []pluginCopy, rr *reads, run int) error {
	e := p.e
	rng := rand.New(rand.NewPCG(e.cfg.Seed, uint64(run)))
	cb, n := e.cfg.ChunkBytes, int64(e.cfg.MaxBytes)
	var rs []coldRead
	for k := int64(0); ; k++ {
		any := false
		for _, c := range cs {
			size := e.fin[c.seg].SizeInBytes
			from, to := k*cb, min((k+1)*cb, size)
			if from >= size {
				continue
			}
			any = true
			bs := e.batches[c.seg]
			lo := sort.Search(len(bs), func(i int) bool { return bs[i].Position > from })
			hi := sort.Search(len(bs), func(i int) bool { return bs[i].Position+n > to })
			if lo >= hi {
				continue // no batch start inside the chunk leaves room for a read
			}
			u, err := p.getURL(ctx, c)
			if err != nil {
				return err
			}
			rs = append(rs, coldRead{c: c, url: u, pos: bs[lo+rng.IntN(hi-lo)].Position, n: n})
		}
		if !any {
			break
		}
	}
	m0 := scrapeNamed(p.d.metricsURL, pluginMetricNames)
	for i, r := range rs {
		raw := func() error {
			_, err := p.timed(ctx, rr.raw, "get %s %d %d %d", r.url, r.c.base, r.pos, r.n)
			return err
		}
		plugin := func() error {
			if _, err := p.timed(ctx, rr.cold, "fetch %s %d %d", r.c.id, r.pos, r.n); err != nil {
				return err
			}
			_, err := p.timed(ctx, rr.warm, "fetch %s %d %d", r.c.id, r.pos, r.n)
			return err
		}
		ops := []func() error{raw, plugin}
		for k := range ops {
			if err := ops[(i+k)%2](); err != nil {
				return err
			}
		}
	}
	m1 := p.settled()
	if m0 != nil && m1 != nil {
		rr.gets += m1["tierd_fetch_log_gets_total"] - m0["tierd_fetch_log_gets_total"]
		rr.fetched += fetchedBytes(m1) - fetchedBytes(m0)
	}
	rr.samples += len(rs)
	return nil
}

// settled waits for the child's loads to end and returns its metrics.
func (p *pluginRun) settled() map[string]float64 {
	url := p.d.metricsURL
	return settled(&readTarget{metrics: func() map[string]float64 { return scrapeNamed(url, pluginMetricNames) }})
}

// warmReads makes reads of every kind on copies, untimed, so that the
// JVM has compiled what the timed ones run.
func (p *pluginRun) warmReads(ctx context.Context, cs []pluginCopy) error {
	n := int64(p.e.cfg.MaxBytes)
	for i := range 32 {
		c := cs[i%len(cs)]
		bs := p.e.batches[c.seg]
		pos := bs[(i*7919)%len(bs)].Position
		u, err := p.getURL(ctx, c)
		if err != nil {
			return err
		}
		for _, cmd := range []string{fmt.Sprintf("get %s %d %d %d", u, c.base, pos, n), fmt.Sprintf("fetch %s %d %d", c.id, pos, n)} {
			if _, err := p.j.do(ctx, "%s", cmd); err != nil {
				return err
			}
		}
	}
	return nil
}

// pluginReaderMetrics are plugin_readers' measures per N: bytes tierd
// fetched from the store, and bytes its endpoint answered, per byte the
// readers took; CPU seconds per GiB taken of the JVM, the tierd child and
// MinIO.
var pluginReaderMetrics = []string{"mib_per_s", "p50_ms", "p99_ms", "fetched_per_served", "answered_per_served",
	"jvm_cpu_s_per_gib", "tierd_cpu_s_per_gib", "store_cpu_s_per_gib"}

// readers runs plugin_readers: for each round and each N of
// cfg.ReaderCounts, a fresh tierd child (empty caches) and N broker
// readers in the JVM over copies, each reading cfg.readerBytes(N).
func (p *pluginRun) readers(ctx context.Context, cs []pluginCopy) ([]*Series, error) {
	e := p.e
	sizes, rounds := e.cfg.ReaderCounts, e.cfg.Rounds
	ser := map[string]*Series{}
	var out []*Series
	for _, m := range pluginReaderMetrics {
		ser[m] = newSeries("plugin_readers", "broker", m, sizes, rounds, false)
		out = append(out, ser[m])
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.id.String()
	}
	for r := range rounds {
		for i, n := range sizes {
			if err := p.restart(ctx); err != nil {
				return nil, err
			}
			if err := p.open(ctx); err != nil {
				return nil, err
			}
			m0 := scrapeNamed(p.d.metricsURL, pluginMetricNames)
			c0 := p.cpu()
			stop := p.profile(fmt.Sprintf("plugin_readers_%d_r%d", n, r+1))
			a, err := p.j.do(ctx, "readers %d %d %d %s", n, e.cfg.readerBytes(n), e.cfg.MaxBytes, strings.Join(ids, " "))
			c := p.cpu().since(c0)
			if perr := stop(); perr != nil {
				e.logf("plugin_readers_%d (round %d): %v", n, r+1, perr)
			}
			if err != nil {
				return nil, fmt.Errorf("plugin_readers_%d: %w", n, err)
			}
			res := newResult("")
			for _, l := range a.LatNS {
				res.add(time.Duration(l), 0)
			}
			res.bytes, res.wall = a.Bytes, time.Duration(a.NS)
			res.finish()
			m1 := p.settled()
			gib := float64(a.Bytes) / (1 << 30)
			vals := map[string]float64{"mib_per_s": res.MiBPerS, "p50_ms": res.P50 / 1000, "p99_ms": res.P99 / 1000}
			if m0 != nil && m1 != nil && a.Bytes > 0 {
				vals["fetched_per_served"] = (fetchedBytes(m1) - fetchedBytes(m0)) / float64(a.Bytes)
				vals["answered_per_served"] = (m1["tierd_rsm_fetch_bytes_total"] - m0["tierd_rsm_fetch_bytes_total"]) / float64(a.Bytes)
			}
			for k, name := range map[string]string{"jvm": "jvm_cpu_s_per_gib", "tierd": "tierd_cpu_s_per_gib", "minio": "store_cpu_s_per_gib"} {
				if v, ok := c[k]; ok && gib > 0 {
					vals[name] = v / gib
				}
			}
			for k, v := range vals {
				ser[k].set(r, i, v)
			}
			e.logf("plugin_readers_%d (round %d): %.0f MiB/s, p50 %.1f ms, p99 %.1f ms, %.2f bytes fetched and %.2f answered per byte taken; CPU-s/GiB JVM %.2f, tierd %.2f, MinIO %.2f over %.1f s",
				n, r+1, res.MiBPerS, res.P50/1000, res.P99/1000, vals["fetched_per_served"], vals["answered_per_served"],
				vals["jvm_cpu_s_per_gib"], vals["tierd_cpu_s_per_gib"], vals["store_cpu_s_per_gib"], res.wall.Seconds())
		}
	}
	return out, nil
}

// trace takes an execution trace of the tierd child (http.pprof) over
// ProfileSeconds into <ProfileDir>/<name>.tierd.trace when ProfileDir is
// set (go tool trace; -pprof=net, sync, syscall, sched give where its
// goroutines wait); stop waits for it.
func (p *pluginRun) trace(name string) (stop func() error) {
	dir := p.e.cfg.ProfileDir
	if dir == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	url := fmt.Sprintf("%s/debug/pprof/trace?seconds=%d", p.d.httpURL, p.e.cfg.ProfileSeconds)
	go func() {
		rp := &readProfile{dir: dir, name: name, httpURL: p.d.httpURL}
		rp.get(strings.TrimPrefix(url, p.d.httpURL), "tierd.trace")
		done <- errors.Join(rp.errs...)
	}()
	return func() error { return <-done }
}

// profile starts a CPU profile of the tierd child (http.pprof) into
// <ProfileDir>/<name>.tierd.cpu.pprof over ProfileSeconds when
// ProfileDir is set; stop waits for it.
func (p *pluginRun) profile(name string) (stop func() error) {
	return startReadProfile(p.e.cfg.ProfileDir, name, p.d.httpURL, p.e.cfg.ProfileSeconds)
}
