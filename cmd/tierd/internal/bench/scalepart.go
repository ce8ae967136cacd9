package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/seglog"
)

// This file holds scale_partitions: the copier's passes over many small
// partitions, on the filesystem bucket and on the bench's S3 bucket.

const (
	scaleTopic       = "scale"
	scaleRolled      = 3   // rolled segments per partition
	scaleRecordBytes = 100 // value bytes; 16 records a batch, one batch a segment
)

// writeScaleLogs writes a log dir of n partitions scale-0 .. scale-(n-1),
// each of scaleRolled rolled segments of one batch and an empty active
// segment, with the broker's high watermark and log start offset
// checkpoint files, as a Kafka log dir has them. It returns the log dir.
func writeScaleLogs(dir string, n int) (string, error) {
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", err
	}
	lcfg := seglog.DefaultConfig()
	value := make([]byte, scaleRecordBytes)
	now := time.Now().UnixMilli()
	recs := make([]seglog.Record, 16)
	for i := range recs {
		recs[i] = seglog.Record{Value: value, Timestamp: now}
	}
	var hw, lso strings.Builder
	for p := 0; p < n; p++ {
		l, err := seglog.Open(filepath.Join(logs, fmt.Sprintf("%s-%d", scaleTopic, p)), lcfg)
		if err != nil {
			return "", err
		}
		for range scaleRolled {
			if _, err := l.AppendBatch(batch.CodecNone, recs...); err != nil {
				l.Close()
				return "", err
			}
			if err := l.Roll(); err != nil {
				l.Close()
				return "", err
			}
		}
		if err := l.Close(); err != nil {
			return "", err
		}
		fmt.Fprintf(&hw, "%s %d %d\n", scaleTopic, p, scaleRolled*16)
		fmt.Fprintf(&lso, "%s %d 0\n", scaleTopic, p)
	}
	// Kafka's checkpoint format: version 0, the entry count, then
	// "topic partition offset" lines.
	for name, body := range map[string]string{kafkalog.ReplicationOffsetCheckpointFile: hw.String(), kafkalog.LogStartOffsetCheckpointFile: lso.String()} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(fmt.Sprintf("0\n%d\n%s", n, body)), 0o644); err != nil {
			return "", err
		}
	}
	return logs, nil
}

// scaleBucket returns a new, empty bucket of the kind named: "filesystem"
// (a directory under dir) or "minio" (a prefix of its own under the run's
// prefix in the bench's S3 bucket), wrapped to count requests.
func (e *env) scaleBucket(kind, dir, name string) (*rsm.CountingBucket, *rsm.Manager, error) {
	var b rsm.Bucket
	prefix := ""
	switch kind {
	case "filesystem":
		fb, err := filesystem.New(filesystem.Config{Dir: filepath.Join(dir, "bucket")})
		if err != nil {
			return nil, nil, err
		}
		b = fb
	case "minio":
		b, prefix = e.rec, e.prefix+"/"+name
	default:
		return nil, nil, fmt.Errorf("bench: unknown bucket %q (filesystem, minio)", kind)
	}
	cb := rsm.Count(b)
	mgr, err := rsm.NewManager(cb, rsm.Config{Prefix: prefix})
	return cb, mgr, err
}

// metaStore opens a metadata store in dir whose file syncs are counted in n.
func metaStore(dir string, n *atomic.Int64) (*rlmm.Store, error) {
	return rlmm.Open(rlmm.Config{Dir: dir}, rlmm.WithFS(syncFS{FS: vfs.Default, n: n}))
}

// passCost is what one copier pass cost.
type passCost struct {
	cpu      float64 // CPU seconds, the bench process's and, on MinIO, the store's
	wall     time.Duration
	requests int64 // bucket requests
	syncs    int64 // metadata file syncs
}

// pass runs one copier pass over a bucket of the kind named and measures
// it. The store's CPU counts only on the minio bucket: on the filesystem
// bucket MinIO takes no part in the pass, and its background work (which
// grows with the objects the earlier sizes left in it and with the
// pass's wall time) would be counted as the pass's.
func (e *env) pass(ctx context.Context, kind string, c *copier.Copier, b *rsm.CountingBucket, syncs *atomic.Int64) (passCost, error) {
	r0, s0, c0, t0 := int64(b.Total()), syncs.Load(), e.cpu(), time.Now()
	_, err := c.Sync(ctx)
	d := e.cpu().sub(c0)
	pc := passCost{cpu: d.proc, wall: time.Since(t0), requests: int64(b.Total()) - r0, syncs: syncs.Load() - s0}
	if kind == "minio" {
		pc.cpu += max(d.store, 0)
	}
	return pc, err
}

func newScaleCopier(logs string, store *rlmm.Store, mgr *rsm.Manager) (*copier.Copier, error) {
	ccfg := copier.DefaultConfig()
	ccfg.LogDirs = []string{logs}
	ccfg.OwnershipLease = 0 // the bench alone writes its prefix
	return copier.New(ccfg, store, mgr, copier.WithLogger(slog.New(slog.DiscardHandler)))
}

// restartPasses is how many restarts partStep measures: each a new
// store handle and a new copier over the same state, and its first pass.
const restartPasses = 5

// partCost is what one size of scale_partitions measured.
type partCost struct {
	first        passCost
	restart      passCost // the median of restartPasses restarts by CPU
	firstRestart passCost // the first of them
	idle         passCost
	heapMiB      float64
	pebbleMiB    float64
}

// partStep is one size of scale_partitions on one bucket: a new metadata
// store and an empty bucket; the first pass (copies every rolled
// segment); restartPasses times a restart (a new store handle and copier
// over the same state, after a collection, so that each starts from the
// same heap) and its first pass; then an idle pass of the last copier.
// The restart pass reported is the median of them by CPU: one restart
// varies by up to 2x from run to run on a shared machine, and the first
// in a process pays more warm-up than the rest (both are shown).
func (e *env) partStep(ctx context.Context, kind, logs, dir, name string, n int) (pc partCost, err error) {
	b, mgr, err := e.scaleBucket(kind, dir, name)
	if err != nil {
		return
	}
	var syncs atomic.Int64
	meta := filepath.Join(dir, "metadata")
	store, err := metaStore(meta, &syncs)
	if err != nil {
		return
	}
	c, err := newScaleCopier(logs, store, mgr)
	if err != nil {
		store.Close()
		return
	}
	pc.first, err = e.pass(ctx, kind, c, b, &syncs)
	if err == nil {
		err = checkCopied(store, n)
	}
	store.Close()
	if err != nil {
		err = fmt.Errorf("first pass: %w", err)
		return
	}
	store, c = nil, nil // not live in heap0: the closed store keeps its caches
	heap0 := liveHeap()
	var restarts []passCost
	for k := range restartPasses {
		if store != nil {
			store.Close()
		}
		runtime.GC()
		if store, err = metaStore(meta, &syncs); err != nil {
			return
		}
		if c, err = newScaleCopier(logs, store, mgr); err != nil {
			store.Close()
			return
		}
		rc, perr := e.pass(ctx, kind, c, b, &syncs)
		if perr != nil {
			store.Close()
			err = fmt.Errorf("restart pass %d: %w", k+1, perr)
			return
		}
		restarts = append(restarts, rc)
	}
	defer store.Close()
	pc.firstRestart = restarts[0]
	sort.Slice(restarts, func(i, j int) bool { return restarts[i].cpu < restarts[j].cpu })
	pc.restart = restarts[len(restarts)/2]
	if pc.idle, err = e.pass(ctx, kind, c, b, &syncs); err != nil {
		err = fmt.Errorf("idle pass: %w", err)
		return
	}
	pc.heapMiB = max(0, liveHeap()-heap0) / (1 << 20) // a collection may free more than the step kept
	runtime.KeepAlive(c)
	pc.pebbleMiB = float64(dirBytes(meta)) / (1 << 20)
	return
}

// liveHeap is the Go heap in use after a collection, bytes: what the
// copier and the metadata store hold, measured in process (the bench's
// own RSS holds the other cases' buffers too).
func liveHeap() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

// checkCopied fails unless every rolled segment of the n partitions has
// a finished copy.
func checkCopied(store *rlmm.Store, n int) error {
	tps, err := store.Partitions()
	if err != nil {
		return err
	}
	total := 0
	for _, tp := range tps {
		fin, err := store.FinishedSegments(tp)
		if err != nil {
			return err
		}
		total += len(fin)
	}
	if total != n*scaleRolled {
		return fmt.Errorf("%d finished copies after the first pass, want %d", total, n*scaleRolled)
	}
	return nil
}

// dirBytes is the size of the files under dir, bytes.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// scalePartitions measures scale_partitions at every size of
// cfg.Partitions, on every bucket of cfg.ScaleBuckets, cfg.Rounds times.
// A size whose step does not finish within cfg.CaseTimeout is reported
// as timed out, and the larger sizes of that bucket are not tried.
func (e *env) scalePartitions(ctx context.Context) ([]*Series, error) {
	sizes, rounds := e.cfg.Partitions, e.cfg.Rounds
	var out []*Series
	logs := map[int]string{}
	for _, kind := range e.cfg.ScaleBuckets {
		ser := map[string]*Series{}
		for _, m := range []struct {
			name   string
			growth bool
		}{{"first_pass_cpu_s", true}, {"restart_pass_cpu_s", true}, {"first_restart_pass_cpu_s", false}, {"idle_pass_cpu_s", true}, {"idle_pass_wall_s", false},
			{"idle_pass_bucket_requests", false}, {"idle_pass_synced_writes", false}, {"heap_retained_mib", false}, {"pebble_mib", false}} {
			ser[m.name] = newSeries("scale_partitions", kind, m.name, sizes, rounds, m.growth)
			out = append(out, ser[m.name])
		}
		stopAt := len(sizes)
		for r := range rounds {
			for i, n := range sizes {
				if i >= stopAt {
					break
				}
				if logs[n] == "" {
					t := time.Now()
					l, err := writeScaleLogs(filepath.Join(e.dir, fmt.Sprintf("scale-logs-%d", n)), n)
					if err != nil {
						return nil, err
					}
					logs[n] = l
					e.logf("scale_partitions: wrote %d partitions of %d rolled segments in %s", n, scaleRolled, time.Since(t).Round(time.Millisecond))
				}
				name := fmt.Sprintf("scale-p%d-%s-r%d", n, kind, r)
				dir := filepath.Join(e.dir, name)
				sctx, cancel := context.WithTimeout(ctx, e.cfg.CaseTimeout)
				t := time.Now()
				pc, err := e.partStep(sctx, kind, logs[n], dir, name, n)
				cancel()
				os.RemoveAll(dir)
				if errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
					for _, s := range out[len(out)-len(ser):] {
						s.TimedOut[i] = timedOut(e.cfg.CaseTimeout)
					}
					e.logf("scale_partitions/%s at %d partitions: timed out after %s", kind, n, e.cfg.CaseTimeout)
					stopAt = i
					break
				}
				if err != nil {
					return nil, fmt.Errorf("scale_partitions/%s at %d partitions: %w", kind, n, err)
				}
				for k, v := range map[string]float64{"first_pass_cpu_s": pc.first.cpu, "restart_pass_cpu_s": pc.restart.cpu,
					"first_restart_pass_cpu_s": pc.firstRestart.cpu, "idle_pass_cpu_s": pc.idle.cpu, "idle_pass_wall_s": pc.idle.wall.Seconds(),
					"idle_pass_bucket_requests": float64(pc.idle.requests), "idle_pass_synced_writes": float64(pc.idle.syncs),
					"heap_retained_mib": pc.heapMiB, "pebble_mib": pc.pebbleMiB} {
					ser[k].set(r, i, v)
				}
				e.logf("scale_partitions/%s at %d partitions (round %d): first pass %.2f CPU-s, restart %.2f (median of %d; the first %.2f), idle %.2f (%d requests, %d syncs) in %s",
					kind, n, r+1, pc.first.cpu, pc.restart.cpu, restartPasses, pc.firstRestart.cpu, pc.idle.cpu, pc.idle.requests, pc.idle.syncs,
					time.Since(t).Round(time.Millisecond))
			}
		}
	}
	return out, nil
}
