package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/proto/tierdpb"
)

// gets is the number of GETs tierd's fetch server has made (.log and
// index objects).
func (e *env) gets() float64 {
	l, i := e.getsBy()
	return l + i
}

// getsBy is the GETs of .log objects and of index objects.
func (e *env) getsBy() (log, idx float64) {
	mfs, err := e.reg.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "tierd_fetch_log_gets_total":
				log += m.GetCounter().GetValue()
			case "tierd_fetch_index_gets_total":
				idx += m.GetCounter().GetValue()
			}
		}
	}
	return log, idx
}

// fetchRetry sends req until it is answered with something other than
// UNAVAILABLE (remote.fetch.max.wait.ms passed while the store was slow
// or loaded), at most 100 times, 10 ms apart, as a consumer retries;
// retries are counted in r (when not nil).
func fetchRetry(ctx context.Context, c *grpcapi.Client, req *tierdpb.FetchRequest, r *Result) (*tierdpb.FetchResponse, error) {
	return retryUnavailable(ctx, func() (*tierdpb.FetchResponse, error) { return c.API().Fetch(ctx, req) }, r)
}

// retryUnavailable calls fetch as fetchRetry sends its request.
func retryUnavailable(ctx context.Context, fetch func() (*tierdpb.FetchResponse, error), r *Result) (*tierdpb.FetchResponse, error) {
	for retries := 0; ; retries++ {
		resp, err := fetch()
		if status.Code(err) != codes.Unavailable || retries == 100 || ctx.Err() != nil {
			return resp, err
		}
		if r != nil {
			r.retries++
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) tieredBytes() int64 {
	var n int64
	for _, m := range e.fin {
		n += m.SizeInBytes
	}
	return n
}

// readAll is one consumer reading the tiered log from offset from to its
// end and then from its start up to from (all of it once), comparing
// every answer byte for byte with the local segment files (so the answers
// are also contiguous). It returns the bytes read.
func (e *env) readAll(ctx context.Context, c *grpcapi.Client, from int64, r *Result) (int64, error) {
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
	var total int64
	read := func(off, stop int64) error {
		retries := 0
		for off < stop {
			t := time.Now()
			resp, err := c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: topic, Offset: off, MaxBytes: e.cfg.MaxBytes})
			if r != nil {
				r.add(time.Since(t), int64(len(resp.GetRecords())))
			}
			if status.Code(err) == codes.Unavailable && retries < 100 && ctx.Err() == nil {
				// Retryable (remote.fetch.max.wait.ms passed): as a consumer
				// does, ask again; the load goes on meanwhile.
				retries++
				if r != nil {
					r.retries++
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				return fmt.Errorf("replay at offset %d: %w", off, err)
			}
			retries = 0
			if resp.NextOffset <= off {
				return fmt.Errorf("replay at offset %d: no progress (next %d)", off, resp.NextOffset)
			}
			s := e.expect(off)
			if err := check("replay", s, resp.Records, resp.NextOffset, e.maps[s.seg][s.pos:s.pos+s.len]); err != nil {
				return err
			}
			total += int64(len(resp.Records))
			off = resp.NextOffset
		}
		return nil
	}
	if err := read(from, last+1); err != nil {
		return total, err
	}
	return total, read(first, from)
}

// replays runs replay and kafka_replay cfg.Rounds times each, taking
// turns (which goes first alternates), and sums each one's rounds: MiB/s
// over all of them, GETs per MiB, every Fetch's latency; the note lists
// each round's MiB/s.
func (e *env) replays(ctx context.Context) (replay, kafka *Result, err error) {
	replay, kafka = newResult("replay"), newResult("kafka_replay")
	kinds := []struct {
		total *Result
		run   func(context.Context) (*Result, error)
		rates []string
		cpus  []string // CPU-s/GiB proc+store by round
	}{{total: replay, run: e.replay}, {total: kafka, run: e.kafkaReplay}}
	for i := 0; i < e.cfg.Rounds; i++ {
		for k := range kinds {
			kd := &kinds[(i+k)%len(kinds)]
			stop := e.profile(fmt.Sprintf("%s-%d", kd.total.Name, i+1))
			c0 := e.cpu()
			r, err := kd.run(ctx)
			stop()
			if err != nil {
				return nil, nil, err
			}
			c := e.cpu().sub(c0)
			kd.total.addCPU(c, r.bytes)
			kd.total.merge(r)
			kd.total.wall += r.wall
			kd.total.gets += r.gets
			kd.rates = append(kd.rates, fmt.Sprintf("%.0f", float64(r.bytes)/(1<<20)/r.wall.Seconds()))
			kd.cpus = append(kd.cpus, c.perGiB(r.bytes))
			gib := float64(r.bytes) / (1 << 30)
			kd.total.RoundMiBPerS = append(kd.total.RoundMiBPerS, float64(r.bytes)/(1<<20)/r.wall.Seconds())
			kd.total.RoundCPUPerGiB = append(kd.total.RoundCPUPerGiB, (c.proc+max(c.store, 0))/gib)
		}
	}
	for _, kd := range kinds {
		g := kd.total.gets / (float64(kd.total.bytes) / (1 << 20))
		kd.total.GetsPerMiB = &g
		kd.total.Note = fmt.Sprintf("MiB/s by round %s; CPU-s/GiB proc+store by round %s",
			strings.Join(kd.rates, ", "), strings.Join(kd.cpus, ", "))
	}
	return replay, kafka, nil
}

// replay is one consumer reading the whole tiered log from offset 0 with
// empty caches; it records the time taken (wall) and the GETs made.
func (e *env) replay(ctx context.Context) (*Result, error) {
	e.server.Engine().DropCaches(true)
	r := newResult("replay")
	before := e.gets()
	start := time.Now()
	n, err := e.readAll(ctx, e.client, e.fin[0].StartOffset, r)
	if err != nil {
		return nil, err
	}
	r.wall = time.Since(start)
	if n != e.tieredBytes() {
		return nil, fmt.Errorf("replay read %d bytes, the tiered log holds %d", n, e.tieredBytes())
	}
	r.gets = e.gets() - before
	return r, nil
}

// rawSeqGet reads every tiered .log with one GET each, one after another.
func (e *env) rawSeqGet(ctx context.Context) (*Result, error) {
	r := newResult("raw_seq_get")
	buf := make([]byte, 1<<20)
	defer e.profile("raw_seq_get")()
	c0 := e.cpu()
	defer func() { r.addCPU(e.cpu().sub(c0), r.bytes) }()
	start := time.Now()
	for _, m := range e.fin {
		t := time.Now()
		rc, err := e.mgr.FetchLogSegment(ctx, m, 0, m.SizeInBytes)
		if err != nil {
			return nil, err
		}
		n, err := io.CopyBuffer(io.Discard, rc, buf)
		rc.Close()
		r.add(time.Since(t), n)
		if err != nil || n != m.SizeInBytes {
			return nil, fmt.Errorf("raw_seq_get %s: %d of %d bytes: %v", m.ID, n, m.SizeInBytes, err)
		}
	}
	r.wall = time.Since(start)
	return r, nil
}

// floorStream sends as many bytes as the tiered log holds through the
// floor server, in RPCs of max_bytes, one after another, and adds the
// CPU this took, per byte, to r (grpc_floor): the transport's own CPU
// cost of a replay, measured apart from the latency samples (which take
// turns with fetch_warm, so their CPU cannot be told apart).
func (e *env) floorStream(ctx context.Context, r *Result) error {
	total := e.tieredBytes()
	defer e.profile("grpc_floor_stream")()
	c0 := e.cpu()
	for sent := int64(0); sent < total; {
		n := min(int64(e.cfg.MaxBytes), total-sent)
		resp, err := e.floor.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: topic, MaxBytes: int32(n)})
		if err != nil {
			return fmt.Errorf("%s stream: %w", r.Name, err)
		}
		if int64(len(resp.Records)) != n {
			return fmt.Errorf("%s stream: %d bytes, want %d", r.Name, len(resp.Records), n)
		}
		sent += n
	}
	r.addCPU(e.cpu().sub(c0), total)
	return nil
}

// memory runs cfg.Readers consumers at once, each reading the whole log
// from its own starting offset (its last fetch may reach past it), against
// a "tierd run" child (bin) started with empty caches, and records the
// child's peak anonymous resident memory (what tierd allocates; the
// binary's file-backed pages are shared and reclaimable) against the
// cache budgets + 64 MiB, and its peak total RSS. With
// bin "" the server is the in-process one and the peak is this whole
// process's (the consumers included).
func (e *env) memory(ctx context.Context, bin string) (*Result, error) {
	r := newResult(fmt.Sprintf("replay_%d", e.cfg.Readers))
	limit := e.fcfg.MemoryBytes() + 64<<20
	client, pid := e.client, os.Getpid()
	if bin != "" {
		d, err := e.startDaemon(ctx, bin, -2)
		if err != nil {
			return nil, err
		}
		defer d.stop()
		client, pid = d.client, d.cmd.Process.Pid
		r.Note = fmt.Sprintf("tierd run child (pid %d); ", pid)
	} else {
		e.server.Engine().DropCaches(true)
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit)) // what tierd run sets
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset the peak
		r.Note = "in-process server: the peak counts the consumers too; "
	}
	base := procStatus(pid, "VmRSS")
	peakAnon := procStatus(pid, "RssAnon")
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() { // the kernel keeps no peak of anonymous memory alone
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				peakAnon = max(peakAnon, procStatus(pid, "RssAnon"))
			}
		}
	}()
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := 0; i < e.cfg.Readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			from := first + (last-first+1)*int64(i)/int64(e.cfg.Readers)
			part := newResult("")
			n, err := e.readAll(ctx, client, from, part)
			mu.Lock()
			defer mu.Unlock()
			r.merge(part)
			if err == nil && n < e.tieredBytes() {
				err = fmt.Errorf("reader %d read %d bytes, the tiered log holds %d", i, n, e.tieredBytes())
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}(i)
	}
	wg.Wait()
	r.wall = time.Since(start)
	close(stopSampling)
	<-sampled
	if firstErr != nil {
		return nil, firstErr
	}
	peak := procStatus(pid, "VmHWM")
	limitMiB := float64(limit) / (1 << 20)
	r.PeakRSSMiB, r.PeakTotalRSSMiB, r.LimitMiB = &peakAnon, &peak, &limitMiB
	r.Note += fmt.Sprintf("RSS %.0f MiB before the readers; peak anonymous RSS (heap, stacks, buffers; sampled every 5 ms) %.0f MiB; "+
		"peak total RSS %.0f MiB, of which %.0f MiB are the binary's file-backed pages", base, peakAnon, peak, procStatus(pid, "RssFile"))
	return r, nil
}

// procStatus reads a "kB" field of /proc/<pid>/status, in MiB (0 when
// there is none).
func procStatus(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
