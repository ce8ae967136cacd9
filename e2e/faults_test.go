package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// faultWorld is MinIO behind a fault proxy, a Pebble store and a log dir.
type faultWorld struct {
	t      *testing.T
	proxy  *rsmtest.FaultProxy
	direct *minio.Bucket // straight to MinIO, for checks
	bucket *minio.Bucket // through the proxy
	store  *rlmm.Store
	mgr    *rsm.Manager
	logDir string
}

func newFaultWorld(t *testing.T, bucketName string, retries int) *faultWorld {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, bucketName)
	w := &faultWorld{t: t, proxy: rsmtest.StartFaultProxy(t, srv.Endpoint), logDir: t.TempDir()}
	cfg := minio.DefaultConfig()
	cfg.Bucket, cfg.Insecure, cfg.PartSize, cfg.PartConcurrency, cfg.MaxRetries = bucketName, true, 5<<20, 1, retries
	var err error
	cfg.Endpoint = srv.Endpoint
	if w.direct, err = minio.New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Endpoint = w.proxy.Endpoint
	if w.bucket, err = minio.New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if w.store, err = rlmm.Open(rlmm.Config{Dir: filepath.Join(t.TempDir(), "rlmm")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	if w.mgr, err = rsm.NewManager(w.bucket, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *faultWorld) copier(timeout time.Duration) *copier.Copier {
	cfg := copier.DefaultConfig()
	cfg.LogDirs, cfg.CopyTimeout = []string{w.logDir}, timeout
	cfg.BrokerID, cfg.InstanceID = 1, "e2e"
	c, err := copier.New(cfg, w.store, w.mgr)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// writeLog writes n records of size bytes to a new partition, rolling
// after every perSegment records, and leaves an empty active segment.
func (w *faultWorld) writeLog(tp string, n, size, perSegment int) {
	w.t.Helper()
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := seglog.Open(filepath.Join(w.logDir, tp), cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < n; i++ {
		if _, err := l.Append(seglog.Record{Value: value(int64(i))[:min(size, 5000)], Key: make([]byte, max(0, size-5000))}); err != nil {
			w.t.Fatal(err)
		}
		if (i+1)%perSegment == 0 {
			l.Roll()
		}
	}
}

func (w *faultWorld) rows(tp remotelog.TopicPartition) map[remotelog.SegmentState]int {
	rows, err := w.store.Segments(tp)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[remotelog.SegmentState]int{}
	for _, r := range rows {
		out[r.State]++
	}
	return out
}

// checkNoOrphans: every object belongs to a finished row; no multipart
// upload is left.
func (w *faultWorld) checkNoOrphans(tps ...remotelog.TopicPartition) {
	w.t.Helper()
	live := map[string]bool{}
	for _, tp := range tps {
		rows, _ := w.store.Segments(tp)
		for _, r := range rows {
			if r.State == remotelog.CopySegmentFinished {
				live[r.ID.String()] = true
			}
		}
	}
	ctx := context.Background()
	w.direct.Iter(ctx, "", func(k string) error {
		if _, id, _, ok := rsm.ParseKey(k); (!ok && path.Base(k) != rsm.OwnerObject && !rsm.IsHeartbeatKey(k)) || (ok && !live[id.String()]) {
			w.t.Errorf("object %s has no live row", k)
		}
		return nil
	})
	if ups, err := w.direct.IncompleteUploads(ctx, ""); err != nil || len(ups) != 0 {
		w.t.Errorf("incomplete uploads left: %v %v", ups, err)
	}
}

// TestStalledMultipartUpload (case 3): the endpoint takes part 1 of a
// multipart upload and never answers part 2. The copy fails by its
// deadline, the upload is aborted, other partitions keep tiering, and the
// next attempt succeeds.
func TestStalledMultipartUpload(t *testing.T) {
	t.Parallel()
	w := newFaultWorld(t, "stall", 3)
	w.writeLog("big-0", 14, 900_000, 14) // one 12.6 MB segment: 3 parts of 5 MiB
	w.writeLog("small-0", 40, 100, 10)   // four small segments
	var stalled atomic.Int32
	var endpointDown atomic.Bool // the endpoint stays unreachable for aborts during the first pass
	endpointDown.Store(true)
	w.proxy.SetRule(func(r *http.Request) rsmtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/big-0/") && r.URL.Query().Get("partNumber") == "2" && stalled.Add(1) == 1 {
			return rsmtest.Stall
		}
		if endpointDown.Load() && r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") {
			return rsmtest.Reset // the library's own abort fails too
		}
		return rsmtest.Pass
	})
	c := w.copier(3 * time.Second)
	start := time.Now()
	n, err := c.Sync(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "big-0") {
		t.Fatalf("first pass: %v", err)
	}
	if took > 20*time.Second {
		t.Fatalf("the stalled copy took %s, past its 3s deadline", took)
	}
	small, big := remotelog.TopicPartition{Topic: "small", Partition: 0}, remotelog.TopicPartition{Topic: "big", Partition: 0}
	if n != 4 || w.rows(small)[remotelog.CopySegmentFinished] != 4 {
		t.Fatalf("other partition during the stall: copied %d, rows %v", n, w.rows(small))
	}
	if got := w.rows(big); got[remotelog.CopySegmentFinished] != 0 || got[remotelog.CopySegmentStarted] != 0 {
		t.Fatalf("stalled copy's row %v", got)
	}
	// With every abort failing, the upload's parts are still stored.
	if ups, _ := w.direct.IncompleteUploads(context.Background(), "big-0/"); len(ups) != 1 {
		t.Fatalf("incomplete uploads after the stall: %v", ups)
	}
	endpointDown.Store(false)
	if n, err := c.Sync(context.Background()); err != nil || n != 1 {
		t.Fatalf("retry: copied %d, %v", n, err)
	}
	if got := w.rows(big); got[remotelog.CopySegmentFinished] != 1 {
		t.Fatalf("after retry %v", got)
	}
	w.checkNoOrphans(small, big)
}

// TestSlowDownOnSixthSegment (case 4): the 6th of ten segments gets 503
// SlowDown on every PUT. Segments 1-5 finish, every object has a row, and
// the next pass resumes at the 6th.
func TestSlowDownOnSixthSegment(t *testing.T) {
	t.Parallel()
	w := newFaultWorld(t, "slowdown", 2)
	w.writeLog("ten-0", 100, 200, 10)
	sixth := fmt.Sprintf("/%020d-", 50)
	var failing atomic.Bool
	failing.Store(true)
	w.proxy.SetRule(func(r *http.Request) rsmtest.Fault {
		if failing.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, sixth) {
			return rsmtest.SlowDown
		}
		return rsmtest.Pass
	})
	tp := remotelog.TopicPartition{Topic: "ten", Partition: 0}
	c := w.copier(30 * time.Second)
	n, err := c.Sync(context.Background())
	if err == nil || n != 5 {
		t.Fatalf("first pass: copied %d, %v", n, err)
	}
	fin, _ := w.store.FinishedSegments(tp)
	for i, r := range fin {
		if r.StartOffset != int64(i*10) {
			t.Fatalf("finished %v", fin)
		}
	}
	if len(fin) != 5 {
		t.Fatalf("%d finished, want 5", len(fin))
	}
	w.checkNoOrphans(tp)
	failing.Store(false)
	if n, err := c.Sync(context.Background()); err != nil || n != 5 {
		t.Fatalf("second pass: copied %d, %v", n, err)
	}
	if fin, _ := w.store.FinishedSegments(tp); len(fin) != 10 || fin[5].StartOffset != 50 {
		t.Fatalf("after resume: %v", fin)
	}
	w.checkNoOrphans(tp)
}
