package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// This file holds the plugin case: the broker's path through tierd, the
// Java plugin (io.tierd.kafka.TierdRemoteStorageManager in a JVM, driven
// by kafka-rsm's PluginBench) calling a "tierd run" child that serves
// the RSM endpoint over the bench's bucket, measured beside floors made
// from the same JVM with the same HTTP client: ranged GETs and PUTs of
// presigned URLs straight to the store.
//
//	plugin_copy       copyLogSegmentData of every rolled segment, by path,
//	                  one after another (as a broker copies a partition's)
//	jvm_raw_put       the same .log, .index and .timeindex PUT to the store
//	plugin_fetch_cold fetchLogSegment(meta, position) of a copy nothing of
//	                  whose chunk was read before, up to max_bytes, closed
//	plugin_fetch_warm the same read again (tierd's cache holds it)
//	jvm_raw_get       a ranged GET of the same bytes of the same object
//	plugin_readers    N broker readers (PluginBench's readers) against a
//	                  fresh child (an empty cache) for each N
//
// Each round times plugin_copy and jvm_raw_put twice, A B B A (copy first
// in odd rounds), each run after a sync(2), as the copy case does, the
// first A and B of a round over the even-numbered rolled segments, the
// second over the odd ones (a round moves the log once each way); after
// each plugin copy the reads run on the new copies, whose cache entries
// are new (a chunk cache key is the copy's id): one read per chunk of
// every copy, at a batch start (the offset index's positions here), the
// range inside the chunk and not at its start, in rising position within
// each copy, so that no read continues another (none is read ahead) and
// none finds a part of its chunk loaded; per read the raw GET and the
// cold and warm fetches take turns (which goes first alternates). Copies
// are deleted through the plugin once read (the PUT objects by their
// keys). CPU seconds of the JVM, the tierd child and MinIO (from
// /proc/<pid>/stat) are read before and after every call.

// pluginRun is one plugin case's parts.
type pluginRun struct {
	e     *env
	j     *jvm
	d     *daemon
	rc    *rsmChild
	mc    *minio.Client    // presigns the floor's URLs
	keys  *rsm.Manager     // the broker copies' key layout
	made  map[string]int64 // every copy asked for and not deleted: id -> base offset
	bases []int64          // the rolled segments' base offsets, in log order
}

// pluginOut is the plugin case's results.
type pluginOut struct {
	results []*Result
	series  []*Series
}

// pluginCase runs the plugin case, or returns skip (with no error) when
// it cannot run here: no JDK, no jars, no tierd binary.
func (e *env) pluginCase(ctx context.Context) (out pluginOut, skip string, err error) {
	if e.cfg.DaemonBin == "" {
		return out, errNoBinary.Error(), nil
	}
	java, cp, skip := preparePlugin(e.cfg, e.progress)
	if skip != "" {
		return out, skip, nil
	}
	p := &pluginRun{e: e, made: map[string]int64{}}
	for _, m := range e.fin {
		p.bases = append(p.bases, m.StartOffset)
	}
	if p.keys, err = rsm.NewManager(e.rec, rsm.Config{Prefix: rsmapi.BrokerPrefix(e.prefix, rsmapi.DefaultPrefix)}); err != nil {
		return out, "", err
	}
	endpoint := e.endpoint
	if e.cfg.StoreLatency > 0 { // the floor's GETs wait as tierd's do (its child has a proxy of its own)
		var stop func()
		if endpoint, stop, err = latencyProxy(e.endpoint, e.cfg.StoreLatency); err != nil {
			return out, "", err
		}
		defer stop()
	}
	if p.mc, err = presigner(endpoint, e.cfg.Region); err != nil {
		return out, "", err
	}
	if p.rc, err = newRSMChild(e.dir); err != nil {
		return out, "", err
	}
	if err := p.restart(ctx); err != nil {
		return out, "", err
	}
	defer func() {
		if cerr := p.close(); err == nil {
			err = cerr
		}
	}()
	if p.j, err = startJVM(java, cp, e.partDir, e.cfg.ProfileDir); err != nil {
		return out, "", err
	}
	e.logf("plugin: tierd run child (pid %d) serving the RSM endpoint at %s; JVM (pid %d) with the plugin", p.d.cmd.Process.Pid, p.rc.addr, p.j.pid())
	if err := p.open(ctx); err != nil {
		return out, "", err
	}
	// Warm-up, untimed: copies for the readers (kept), PUTs of two
	// segments, and reads of every kind, so that the JVM has compiled the
	// paths it times.
	start := time.Now()
	readerCopies, err := p.copyRun(ctx, p.all(), nil)
	if err != nil {
		return out, "", err
	}
	if _, err := p.putRun(ctx, "warmup", p.half(0)[:min(2, len(p.half(0)))], nil); err != nil {
		return out, "", err
	}
	if err := p.warmReads(ctx, readerCopies); err != nil {
		return out, "", err
	}
	e.logf("plugin: warm-up (a copy of each segment, PUTs, reads) %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	stop := p.profile("plugin_rounds")
	stopTrace := p.trace("plugin_rounds")
	res, ser, err := p.rounds(ctx)
	if perr := errors.Join(stop(), stopTrace()); perr != nil {
		e.logf("plugin: %v", perr)
	}
	if err != nil {
		return out, "", err
	}
	e.logf("plugin: %d rounds of copies, PUTs and reads %s", e.cfg.Rounds, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	rser, err := p.readers(ctx, readerCopies)
	if err != nil {
		return out, "", err
	}
	e.logf("plugin: readers %s", time.Since(start).Round(time.Millisecond))
	return pluginOut{results: res, series: append(ser, rser...)}, "", nil
}

// presigner is a minio-go client of the store for presigned URLs, with
// the credentials of the environment (as the bench's own client).
func presigner(endpoint, region string) (*minio.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{}})
	return minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", Region: region, BucketLookup: minio.BucketLookupPath})
}

// restart (re)starts the tierd run child, with empty caches, on a port
// picked anew.
func (p *pluginRun) restart(ctx context.Context) error {
	if p.d != nil {
		p.d.stop()
		p.d = nil
	}
	p.rc.addr = ""
	d, err := p.e.startChildRetrying(ctx, p.e.cfg.DaemonBin, 0, p.rc)
	if err != nil {
		return err
	}
	p.d = d
	return nil
}

// open (re)makes the plugin in the JVM for the child's endpoint.
func (p *pluginRun) open(ctx context.Context) error {
	_, err := p.j.do(ctx, "open %s %s tierd.fetch.window.bytes=%d", p.rc.endpoint(), p.rc.tokenFile, p.e.cfg.MaxBytes)
	return err
}

// close deletes every copy still there through the endpoint, stops the
// JVM and the child.
func (p *pluginRun) close() error {
	var errs []string
	if p.d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for id, base := range p.made {
			if err := p.rc.deleteCopy(ctx, base, id); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if p.j != nil {
		p.j.stop()
	}
	if p.d != nil {
		p.d.stop()
	}
	if len(errs) > 0 {
		return fmt.Errorf("plugin: deleting its copies: %s", strings.Join(errs, "; "))
	}
	return nil
}

// cpu3 is the CPU seconds so far of the JVM, the tierd child and the
// store (-1 for one not known): the sum of each one's threads' time on a
// CPU (/proc/<pid>/task/*/schedstat, nanoseconds: the calls timed here
// take milliseconds, where /proc/<pid>/stat counts 10 ms ticks). A thread
// that ends within a call is not counted: the JVM's readers and its
// floor's requests run on threads that outlive the calls; the plugin's
// java.net.http copies start a short thread per answer on a JVM with
// fewer than three cores, whose CPU (a few microseconds) is left out.
type cpu3 struct{ jvm, tierd, store float64 }

func (p *pluginRun) cpu() cpu3 {
	c := cpu3{jvm: taskCPUSeconds(p.j.pid()), tierd: taskCPUSeconds(p.d.cmd.Process.Pid), store: -1}
	if p.e.minio != nil {
		c.store = taskCPUSeconds(p.e.minio.Pid())
	}
	return c
}

// taskCPUSeconds is the time on a CPU of process pid's threads so far,
// seconds, from each /proc/<pid>/task/<tid>/schedstat (its first field,
// ns); threads that have exited are not counted (the Go runtime keeps its
// threads; see cpu3 for the JVM's). It falls back to cpuSeconds when the files cannot be read.
func taskCPUSeconds(pid int) float64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return cpuSeconds(pid)
	}
	var ns float64
	for _, en := range ents {
		data, err := os.ReadFile(filepath.Join(dir, en.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(data))
		if len(f) == 0 {
			return cpuSeconds(pid)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return cpuSeconds(pid)
		}
		ns += v
	}
	return ns / 1e9
}

// since returns c - c0 by process name ("jvm", "tierd", "minio"), unknown
// ones left out.
func (c cpu3) since(c0 cpu3) map[string]float64 {
	out := map[string]float64{}
	for _, x := range []struct {
		k    string
		a, b float64
	}{{"jvm", c.jvm, c0.jvm}, {"tierd", c.tierd, c0.tierd}, {"minio", c.store, c0.store}} {
		if x.a >= 0 && x.b >= 0 {
			out[x.k] = x.a - x.b
		}
	}
	return out
}

// timed runs one JVM command, adding its time, bytes and the processes'
// CPU to r (nil: untimed).
func (p *pluginRun) timed(ctx context.Context, r *Result, format string, args ...any) (jvmAnswer, error) {
	c0 := p.cpu()
	a, err := p.j.do(ctx, format, args...)
	if err != nil || r == nil {
		return a, err
	}
	r.add(time.Duration(a.NS), a.Bytes)
	r.addCPUBy(p.cpu().since(c0))
	return a, nil
}

// pluginCopy is one copy made through the plugin.
type pluginCopy struct {
	id   remotelog.SegmentID
	seg  int // index in e.fin
	base int64
}

// half returns the indexes of the rolled segments of one half of the
// log: those of even index (k even) or odd.
func (p *pluginRun) half(k int) []int {
	var out []int
	for i := k % 2; i < len(p.bases); i += 2 {
		out = append(out, i)
	}
	return out
}

// all returns the indexes of every rolled segment.
func (p *pluginRun) all() []int { return append(p.half(0), p.half(1)...) }

// copyRun copies the rolled segments segs through the plugin, one after
// another, each as a new copy (timed into r when not nil).
func (p *pluginRun) copyRun(ctx context.Context, segs []int, r *Result) ([]pluginCopy, error) {
	var out []pluginCopy
	for _, i := range segs {
		base := p.bases[i]
		c := pluginCopy{id: remotelog.NewSegmentID(), seg: i, base: base}
		p.made[c.id.String()] = base
		if _, err := p.timed(ctx, r, "copy %d %s", base, c.id); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// deleteCopies deletes copies through the plugin (untimed).
func (p *pluginRun) deleteCopies(ctx context.Context, cs []pluginCopy) error {
	for _, c := range cs {
		if _, err := p.j.do(ctx, "delete %s", c.id); err != nil {
			return err
		}
		delete(p.made, c.id.String())
	}
	return nil
}

// putRun PUTs the rolled segments segs' .log, .index and .timeindex to
// presigned URLs under the run's prefix (timed into r when not nil), then
// deletes those objects, by the keys it presigned.
func (p *pluginRun) putRun(ctx context.Context, name string, segs []int, r *Result) (time.Duration, error) {
	type seg struct {
		base int64
		urls []string
	}
	var puts []seg
	var keys []string
	for _, i := range segs {
		base := p.bases[i]
		s := seg{base: base}
		for _, suf := range []string{".log", ".index", ".timeindex"} {
			key := path.Join(p.e.prefix, "plugin-raw-put-"+name, fmt.Sprintf("%020d%s", base, suf))
			u, err := p.mc.PresignedPutObject(ctx, p.e.cfg.Bucket, key, time.Hour)
			if err != nil {
				return 0, err
			}
			keys = append(keys, key)
			s.urls = append(s.urls, u.String())
		}
		puts = append(puts, s)
	}
	// The bench made these PUTs itself (the JVM is its child), under its
	// own claimed prefix: the keys are its proof for deleting them.
	defer func() {
		for _, k := range keys {
			if err := p.e.rec.Delete(context.Background(), k); err != nil {
				p.e.logf("plugin: deleting %s: %v", k, err)
			}
		}
	}()
	var total time.Duration
	for _, s := range puts {
		a, err := p.timed(ctx, r, "put %d %s %s %s", s.base, s.urls[0], s.urls[1], s.urls[2])
		if err != nil {
			return total, err
		}
		total += time.Duration(a.NS)
	}
	return total, nil
}

// getURL presigns a GET of copy c's .log.
func (p *pluginRun) getURL(ctx context.Context, c pluginCopy) (string, error) {
	meta := remotelog.SegmentMetadata{TopicPartition: p.e.tp, StartOffset: c.base, ID: c.id}
	u, err := p.mc.PresignedGetObject(ctx, p.e.cfg.Bucket, p.keys.Key(meta, ".log"), time.Hour, nil)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// rounds times plugin_copy against jvm_raw_put, A B B A per round, and
// after each plugin copy the cold, warm and raw reads of the new copies.
func (p *pluginRun) rounds(ctx context.Context) ([]*Result, []*Series, error) {
	e := p.e
	cp, put := newResult("plugin_copy"), newResult("jvm_raw_put")
	rd := newReads()
	rounds := e.cfg.Rounds
	ratio := newSeries("plugin", "copy", "copy_over_raw_put", []int{len(e.fin)}, rounds, false)
	cold := newSeries("plugin", "fetch", "cold_over_raw_get", []int{len(e.fin)}, rounds, false)
	warm := newSeries("plugin", "fetch", "warm_over_raw_get", []int{len(e.fin)}, rounds, false)
	rates := map[string]*Series{}
	for _, m := range []string{"raw_get_mib_per_s", "cold_mib_per_s", "warm_mib_per_s", "copy_mib_per_s", "raw_put_mib_per_s"} {
		v := "fetch"
		if strings.Contains(m, "put") || strings.Contains(m, "copy") {
			v = "copy"
		}
		rates[m] = newSeries("plugin", v, m, []int{len(e.fin)}, rounds, false)
	}
	var cpRates, putRates []string
	for r := range rounds {
		var c, u time.Duration
		rr := newReads()
		ops := []func(run int) error{
			func(run int) error {
				before := cp.busy
				cs, err := p.copyRun(ctx, p.half(run), cp)
				c += cp.busy - before
				if err != nil {
					return err
				}
				if err := p.coldReads(ctx, cs, rr, r*2+run); err != nil {
					return err
				}
				return p.deleteCopies(ctx, cs)
			},
			func(run int) error {
				d, err := p.putRun(ctx, fmt.Sprintf("r%d-%d", r+1, run+1), p.half(run), put)
				u += d
				return err
			},
		}
		first := r % 2
		for k, op := range []int{first, 1 - first, 1 - first, first} {
			syscall.Sync()
			if err := ops[op](k / 2); err != nil {
				return nil, nil, err
			}
		}
		n := e.tieredBytes() // each half once in each
		cr, pr := float64(n)/(1<<20)/c.Seconds(), float64(n)/(1<<20)/u.Seconds()
		cpRates, putRates = append(cpRates, fmt.Sprintf("%.0f", cr)), append(putRates, fmt.Sprintf("%.0f", pr))
		ratio.set(r, 0, cr/pr)
		rates["copy_mib_per_s"].set(r, 0, cr)
		rates["raw_put_mib_per_s"].set(r, 0, pr)
		for m, x := range map[string]*Result{"raw_get_mib_per_s": rr.raw, "cold_mib_per_s": rr.cold, "warm_mib_per_s": rr.warm} {
			if x.busy > 0 {
				rates[m].set(r, 0, float64(x.bytes)/(1<<20)/x.busy.Seconds())
			}
		}
		if v, ok := rr.ratio(rr.cold); ok {
			cold.set(r, 0, v)
		}
		if v, ok := rr.ratio(rr.warm); ok {
			warm.set(r, 0, v)
		}
		rd.merge(rr)
	}
	cp.Note = fmt.Sprintf("MiB/s by round %v (copyLogSegmentData by path, one segment after another)", cpRates)
	put.Note = fmt.Sprintf("MiB/s by round %v (PUTs of presigned URLs from the same JVM)", putRates)
	rd.notes()
	res := []*Result{cp, put, rd.raw, rd.cold, rd.warm}
	for _, x := range res {
		x.Note = strings.TrimPrefix(x.Note+"; "+cpuNote(x), "; ")
	}
	return res, []*Series{ratio, rates["copy_mib_per_s"], rates["raw_put_mib_per_s"], cold, warm, rates["raw_get_mib_per_s"], rates["cold_mib_per_s"], rates["warm_mib_per_s"]}, nil
}

// cpuNote describes a plugin result's CPU seconds per GiB by process.
func cpuNote(r *Result) string {
	if len(r.cpuBy) == 0 || r.bytes == 0 {
		return ""
	}
	gib := float64(r.bytes) / (1 << 30)
	var parts []string
	for _, k := range []string{"jvm", "tierd", "minio"} {
		if v, ok := r.cpuBy[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", map[string]string{"jvm": "JVM", "tierd": "tierd", "minio": "MinIO"}[k], v/gib))
		}
	}
	return "CPU-s/GiB " + strings.Join(parts, ", ")
}
