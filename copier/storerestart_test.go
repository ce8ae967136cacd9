package copier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestStoreStopsAtEachStepOfACopy: MinIO stops (and the request in
// flight is cut off) at each request of a copy in turn, from the first to
// the last, a 16 MiB .log uploaded in four parts among them; then it
// starts again over its data. Whatever the step: while it is down no
// local segment goes; once it is back, later passes leave exactly one
// finished copy, whose .log reads back equal to the local file, every
// other attempt DELETE_SEGMENT_FINISHED with no object and no incomplete
// upload of any of its keys (listed by exact key, which MinIO answers
// after a restart), and only then does local retention delete the
// segment.
func TestStoreStopsAtEachStepOfACopy(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	direct, err := miniogo.NewCore(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	setup := func(t *testing.T, name string) (*rig, []byte) {
		srv.CreateBucket(t, name)
		mc := minio.DefaultConfig()
		mc.Endpoint, mc.Bucket, mc.Insecure, mc.PartSize, mc.PartConcurrency, mc.MaxRetries = proxy.Endpoint, name, true, 5<<20, 1, 1
		mb, err := minio.New(mc, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.FileDeleteDelayMs = 0
		cfg.Retention.LocalRetentionMs = ptr(0)
		r := newRig(t, cfg, mb)
		old := r.now.UnixMilli() - 3_600_000
		writeSegment(t, r.dir(), 0, seq(0, 16), same(old, 16), 1<<20)
		writeSegment(t, r.dir(), 16, nil, nil, 0)
		log, err := os.ReadFile(r.dir() + "/00000000000000000000.log")
		if err != nil {
			t.Fatal(err)
		}
		return r, log
	}

	// A pass with no fault: how many requests a copy makes.
	var mu sync.Mutex
	var steps []string
	proxy.SetRule(func(req *http.Request) rsmtest.Fault {
		mu.Lock()
		steps = append(steps, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
		mu.Unlock()
		return rsmtest.Pass
	})
	r, _ := setup(t, "count")
	r.sync()
	proxy.SetRule(nil)
	if st := r.states(); st[remotelog.CopySegmentFinished] != 1 {
		t.Fatalf("the copy without faults: %v", st)
	}
	n := len(steps)
	if n < 8 {
		t.Fatalf("a copy made only %d requests: %v", n, steps)
	}
	t.Logf("a copy's pass makes %d requests", n)

	for step := 1; step <= n; step++ {
		t.Run(fmt.Sprintf("step-%02d", step), func(t *testing.T) {
			ctx := context.Background()
			name := fmt.Sprintf("step-%02d", step)
			r, log := setup(t, name)
			var seen, stopped atomic.Int64
			var at string
			proxy.SetRule(func(req *http.Request) rsmtest.Fault {
				if seen.Add(1) == int64(step) && stopped.CompareAndSwap(0, 1) {
					at = req.Method + " " + req.URL.Path + "?" + req.URL.RawQuery
					srv.Stop()
					return rsmtest.Reset
				}
				return rsmtest.Pass
			})
			r.c.Sync(ctx)
			proxy.SetRule(nil)
			if stopped.Load() == 0 {
				t.Skipf("the pass made fewer than %d requests", step)
			}
			if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 16}) && r.states()[remotelog.CopySegmentFinished] == 0 {
				t.Fatalf("stopped at %s: local segments %v with no finished copy", at, got)
			}
			srv.Restart(t)
			for i := 0; i < 4; i++ {
				r.c.Sync(ctx)
			}
			if _, err := r.c.Sync(ctx); err != nil {
				t.Fatalf("stopped at %s: a pass once MinIO is back: %v", at, err)
			}
			rows, err := r.store.Segments(r.tp)
			if err != nil {
				t.Fatal(err)
			}
			var fin []remotelog.SegmentMetadata
			for _, row := range rows {
				switch row.State {
				case remotelog.CopySegmentFinished:
					fin = append(fin, row)
				case remotelog.DeleteSegmentFinished:
				default:
					t.Errorf("stopped at %s: row %s left %s", at, row.ID, row.State)
				}
				for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader-epoch-checkpoint", ".manifest.json"} {
					key := r.mgr.Key(row, suffix)
					res, err := direct.ListMultipartUploads(ctx, name, key, "", "", "", 1000)
					if err != nil {
						t.Fatal(err)
					}
					for _, u := range res.Uploads {
						if u.Key == key {
							t.Errorf("stopped at %s: incomplete upload of %s (%s) left", at, key, row.State)
						}
					}
				}
			}
			if len(fin) != 1 {
				t.Fatalf("stopped at %s: %d finished copies, want 1: %v", at, len(fin), rows)
			}
			var want []string
			for _, k := range r.objects() {
				want = append(want, k)
			}
			for _, k := range want {
				id := fin[0].ID.String()
				if !bytes.Contains([]byte(k), []byte(id)) {
					t.Errorf("stopped at %s: object %s is not the finished copy's", at, k)
				}
			}
			rc, err := r.bucket.GetRange(ctx, r.mgr.Key(fin[0], ".log"), 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, log) {
				t.Fatalf("stopped at %s: the copy's .log reads back %d bytes (%v), want the local %d", at, len(got), err, len(log))
			}
			if got := r.localBases(); !reflect.DeepEqual(got, []int64{16}) {
				t.Errorf("stopped at %s: local segments %v once copied, want only the active one", at, got)
			}
		})
	}
}
