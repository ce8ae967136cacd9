package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// This file holds scale_segments: one partition with many finished
// copies. They are seeded (seedsegs.go: the objects and rows the copier
// makes, without the copier's per-copy local work), one copier pass
// settles them, then the case measures a Fetch with the metadata cached and right after a
// metadata write, "tierd segments", and a retention pass that deletes the
// older half of the copies.

const (
	segsTopic   = "segs"
	fetchProbes = 50 // offsets each Fetch measurement reads
	dayMs       = 24 * 3600 * 1000
)

// writeSegsCheckpoints writes the log dir's checkpoint files for n
// segments of 16 offsets in segs-0 (all committed, log start offset 0)
// and an empty segs-1, and creates segs-1's directory.
func writeSegsCheckpoints(logs string, n int) error {
	if err := os.MkdirAll(filepath.Join(logs, segsTopic+"-1"), 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{
		kafkalog.ReplicationOffsetCheckpointFile: fmt.Sprintf("0\n2\n%s 0 %d\n%s 1 0\n", segsTopic, n*16, segsTopic),
		kafkalog.LogStartOffsetCheckpointFile:    fmt.Sprintf("0\n2\n%s 0 0\n%s 1 0\n", segsTopic, segsTopic),
	} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// segsConfig is the copier configuration of the scale_segments log dir:
// retention.ms is retentionMs (-1 keeps every copy), local retention 1 ms
// (a copied segment's local files go on the next pass), deleted at once.
func segsConfig(logs string, retentionMs int64) copier.Config {
	ccfg := copier.DefaultConfig()
	ccfg.LogDirs = []string{logs}
	ccfg.OwnershipLease = 0
	ccfg.FileDeleteDelayMs = 0
	local := int64(1)
	ccfg.Retention.RetentionMs, ccfg.Retention.LocalRetentionMs = &retentionMs, &local
	return ccfg
}

// segsCopier is a copier of the scale_segments log dir (see segsConfig).
func segsCopier(logs string, store *rlmm.Store, mgr *rsm.Manager, retentionMs int64) (*copier.Copier, error) {
	return copier.New(segsConfig(logs, retentionMs), store, mgr, copier.WithLogger(slog.New(slog.DiscardHandler)))
}

// segsStep is what one size of scale_segments measured.
type segsStep struct {
	build                  time.Duration
	cachedUs, afterWriteUs float64 // Fetch p50, microseconds
	segmentsCmd            time.Duration
	retention              passCost
	deleted                int
}

// segsStep seeds n finished copies in a new store and an empty bucket
// (seedSegs), lets the copier make one pass over them, as the last pass
// of a copier that copied them would, and measures them.
func (e *env) segsStep(ctx context.Context, kind, dir, name string, n int) (st segsStep, err error) {
	t := time.Now()
	b, mgr, err := e.scaleBucket(kind, dir, name)
	if err != nil {
		return st, err
	}
	logs, meta := filepath.Join(dir, "logs"), filepath.Join(dir, "metadata")
	if err := seedSegs(ctx, dir, logs, meta, mgr, segsConfig(logs, -1), n, time.Now().UnixMilli()); err != nil {
		return st, fmt.Errorf("seeding %d copies: %w", n, err)
	}
	var syncs atomic.Int64
	store, err := metaStore(meta, &syncs)
	if err != nil {
		return st, err
	}
	defer func() {
		if store != nil {
			store.Close()
		}
	}()
	if err := settleSegs(ctx, logs, store, mgr, n); err != nil {
		return st, err
	}
	st.build = time.Since(t)

	if st.cachedUs, st.afterWriteUs, err = e.segsFetch(ctx, store, mgr, n); err != nil {
		return st, err
	}

	if e.cfg.DaemonBin != "" {
		store.Close()
		store = nil
		if st.segmentsCmd, err = e.segmentsCmd(ctx, kind, dir, name, logs, meta); err != nil {
			return st, err
		}
		if store, err = metaStore(meta, &syncs); err != nil {
			return st, err
		}
	}

	rc, err := segsCopier(logs, store, mgr, dayMs) // the older half breaches retention.ms
	if err != nil {
		return st, err
	}
	stop := e.profile(fmt.Sprintf("scale_segments_%s_%d_retention", kind, n))
	st.retention, err = e.pass(ctx, kind, rc, b, &syncs)
	stop()
	if err != nil {
		return st, fmt.Errorf("retention pass: %w", err)
	}
	fin, err := store.FinishedSegments(remotelog.TopicPartition{Topic: segsTopic, Partition: 0})
	if err != nil {
		return st, err
	}
	st.deleted = n - len(fin)
	if st.deleted != n/2 {
		return st, fmt.Errorf("the retention pass left %d of %d copies, want %d", len(fin), n, n-n/2)
	}
	return st, nil
}

// settleSegs runs one copier pass (retention.ms -1) over the case's log
// dir and checks that the partition then has n finished copies and only
// its active segment locally.
func settleSegs(ctx context.Context, logs string, store *rlmm.Store, mgr *rsm.Manager, n int) error {
	c, err := segsCopier(logs, store, mgr, -1)
	if err != nil {
		return err
	}
	if _, err := c.Sync(ctx); err != nil {
		return err
	}
	fin, err := store.FinishedSegments(remotelog.TopicPartition{Topic: segsTopic, Partition: 0})
	if err != nil {
		return err
	}
	local, _ := filepath.Glob(filepath.Join(logs, segsTopic+"-0", "*.log"))
	if len(fin) != n || len(local) != 1 {
		return fmt.Errorf("%d of %d copies finished and %d local segments, want only the active one", len(fin), n, len(local))
	}
	return nil
}

// segsFetch measures Fetch (the fetch server's handler, in process, no
// transport) at fetchProbes random offsets of the partition: p50 with
// everything cached, and p50 when each Fetch comes right after a
// metadata write to another partition (its log start offset raised by
// one). Every answer must start at or before its offset and be non-empty.
func (e *env) segsFetch(ctx context.Context, store *rlmm.Store, mgr *rsm.Manager, n int) (cachedUs, afterUs float64, err error) {
	fcfg := grpcapi.DefaultConfig()
	fcfg.Listen = "127.0.0.1:0"
	fcfg.MaxWaitMs = 25000 // as the read cases: measure the wait, not UNAVAILABLE
	srv, err := grpcapi.NewServer(fcfg, store, mgr, grpcapi.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		return 0, 0, err
	}
	defer srv.Close()
	other := remotelog.TopicPartition{Topic: segsTopic, Partition: 1}
	if err := store.EnsurePartition(other, 0); err != nil {
		return 0, 0, err
	}
	rng := rand.New(rand.NewPCG(e.cfg.Seed, uint64(n)))
	offs := make([]int64, fetchProbes)
	for i := range offs {
		offs[i] = rng.Int64N(int64(n) * 16)
	}
	fetchOne := func(off int64) (time.Duration, error) {
		req := &tierdpb.FetchRequest{Topic: segsTopic, Partition: 0, Offset: off, MaxBytes: 1 << 20}
		t := time.Now()
		resp, err := retryUnavailable(ctx, func() (*tierdpb.FetchResponse, error) { return srv.Fetch(ctx, req) }, nil)
		d := time.Since(t)
		if err != nil {
			return d, fmt.Errorf("fetch at offset %d of %d copies: %w", off, n, err)
		}
		// Each copy is one batch of 16 offsets: the answer is that batch.
		if want := off/16*16 + 16; len(resp.Records) == 0 || resp.NextOffset != want {
			return d, fmt.Errorf("fetch at offset %d of %d copies: %d bytes up to %d, want one batch up to %d", off, n, len(resp.Records), resp.NextOffset, want)
		}
		return d, nil
	}
	for _, off := range offs { // load chunks and indexes
		if _, err := fetchOne(off); err != nil {
			return 0, 0, err
		}
	}
	var cached, after []float64
	lso := int64(0)
	for round := range 3 {
		for i, off := range offs {
			doCached := func() error {
				d, err := fetchOne(off)
				cached = append(cached, d.Seconds()*1e6)
				return err
			}
			doAfter := func() error {
				lso++
				if _, err := store.AdvanceOffsets(other, lso, -1); err != nil {
					return err
				}
				d, err := fetchOne(off)
				after = append(after, d.Seconds()*1e6)
				return err
			}
			ops := []func() error{doCached, doAfter}
			for k := range ops {
				// Taking turns; a cached Fetch right after the write's
				// Fetch finds the snapshot that Fetch made.
				if err := ops[(i+round+k)%2](); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	return median(cached), median(after), nil
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// segmentsCmd times "tierd segments" over the case's log dir, bucket and
// metadata (closed meanwhile; no tierd answers on the configured fetch
// address, so the command opens the store itself).
func (e *env) segmentsCmd(ctx context.Context, kind, dir, name, logs, meta string) (time.Duration, error) {
	lis, err := listen()
	if err != nil {
		return 0, err
	}
	addr := lis.Addr().String()
	lis.Close()
	bucket := fmt.Sprintf("  type: filesystem\n  filesystem: {dir: %q}\n", filepath.Join(dir, "bucket"))
	if kind == "minio" {
		bucket = fmt.Sprintf("  type: s3\n  prefix: %q\n  s3: {endpoint: %q, bucket: %q, region: %q, path_style: true}\n", e.prefix+"/"+name, e.endpoint, e.cfg.Bucket, e.cfg.Region)
	}
	yaml := fmt.Sprintf("copier:\n  log_dirs: [%q]\n  ownership_lease: 0s\nbucket:\n%smetadata:\n  dir: %q\nfetch:\n  listen: %q\nhttp:\n  listen: \"\"\nlog_level: warn\n",
		logs, bucket, meta, addr)
	path := filepath.Join(dir, "tierd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, e.cfg.DaemonBin, "segments", "--config", path)
	var errb lockedBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("tierd segments: %w: %s", err, errb.String())
	}
	return time.Since(t), nil
}

// scaleSegments measures scale_segments at every size of cfg.Copies, on
// every bucket of cfg.ScaleBuckets, cfg.Rounds times, with the same
// timeout rule as scale_partitions.
func (e *env) scaleSegments(ctx context.Context) ([]*Series, error) {
	sizes, rounds := e.cfg.Copies, e.cfg.Rounds
	var out []*Series
	for _, kind := range e.cfg.ScaleBuckets {
		ser := map[string]*Series{}
		for _, m := range []struct {
			name   string
			growth bool
		}{{"fetch_cached_p50_ms", false}, {"fetch_after_write_p50_ms", false}, {"segments_cmd_s", true}, {"retention_pass_cpu_s", true},
			{"retention_pass_wall_s", true}, {"retention_pass_bucket_requests", false}, {"retention_pass_syncs", false}, {"build_s", false}} {
			ser[m.name] = newSeries("scale_segments", kind, m.name, sizes, rounds, m.growth)
			out = append(out, ser[m.name])
		}
		stopAt := len(sizes)
		for r := range rounds {
			for i, n := range sizes {
				if i >= stopAt {
					break
				}
				name := fmt.Sprintf("scale-s%d-%s-r%d", n, kind, r)
				dir := filepath.Join(e.dir, name)
				sctx, cancel := context.WithTimeout(ctx, e.cfg.CaseTimeout)
				st, err := e.segsStep(sctx, kind, dir, name, n)
				cancel()
				os.RemoveAll(dir)
				if errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
					for _, s := range ser {
						s.TimedOut[i] = timedOut(e.cfg.CaseTimeout)
					}
					e.logf("scale_segments/%s at %d copies: timed out after %s", kind, n, e.cfg.CaseTimeout)
					stopAt = i
					break
				}
				if err != nil {
					return nil, fmt.Errorf("scale_segments/%s at %d copies: %w", kind, n, err)
				}
				vals := map[string]float64{"fetch_cached_p50_ms": st.cachedUs / 1000, "fetch_after_write_p50_ms": st.afterWriteUs / 1000,
					"retention_pass_cpu_s": st.retention.cpu, "retention_pass_wall_s": st.retention.wall.Seconds(),
					"retention_pass_bucket_requests": float64(st.retention.requests), "retention_pass_syncs": float64(st.retention.syncs),
					"build_s": st.build.Seconds()}
				if e.cfg.DaemonBin != "" {
					vals["segments_cmd_s"] = st.segmentsCmd.Seconds()
				}
				for k, v := range vals {
					ser[k].set(r, i, v)
				}
				e.logf("scale_segments/%s at %d copies (round %d): built in %s; Fetch p50 %.3f ms cached, %.3f ms after a write; tierd segments %s; retention pass deleted %d in %s (%.2f CPU-s, %d synced metadata writes)",
					kind, n, r+1, st.build.Round(time.Millisecond), st.cachedUs/1000, st.afterWriteUs/1000, st.segmentsCmd.Round(time.Millisecond),
					st.deleted, st.retention.wall.Round(time.Millisecond), st.retention.cpu, st.retention.syncs)
			}
		}
	}
	return out, nil
}
