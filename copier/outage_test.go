package copier

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// TestOutageMidMultipartLeavesNothing: on MinIO, through both S3 clients,
// MinIO is stopped while a copy's .log is a multipart upload in flight
// (at its second part), so the copy fails and its clean-up cannot reach
// the store: the attempt's row stays DELETE_SEGMENT_STARTED and its
// upload stays stored, which MinIO, restarted, lists by its exact key
// only. The next pass, by a copier restarted over the same metadata,
// first meets a store that refuses the abort (the row stays, the upload
// too), and the pass after aborts it: nothing of the attempt is left in
// the bucket, incomplete uploads included, its row is
// DELETE_SEGMENT_FINISHED, and the segment is copied under a new id.
func TestOutageMidMultipartLeavesNothing(t *testing.T) {
	for _, client := range []string{"minio", "s3"} {
		t.Run(client, func(t *testing.T) {
			srv := rsmtest.StartMinIO(t)
			proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
			const name = "outage"
			srv.CreateBucket(t, name)
			var mb multipartBucket
			var err error
			if client == "minio" {
				mc := minio.DefaultConfig()
				mc.Endpoint, mc.Bucket, mc.Insecure, mc.PartSize, mc.PartConcurrency, mc.MaxRetries = proxy.Endpoint, name, true, 5<<20, 1, 1
				mb, err = minio.New(mc, nil)
			} else {
				sc := s3.DefaultConfig()
				sc.Endpoint, sc.Bucket, sc.PathStyle, sc.PartSize, sc.PartConcurrency = proxy.URL, name, true, 5<<20, 1
				mb, err = s3.New(context.Background(), sc, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			direct, err := miniogo.NewCore(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")})
			if err != nil {
				t.Fatal(err)
			}
			outageMidMultipart(t, srv, proxy, mb, direct, name)
		})
	}
}

func outageMidMultipart(t *testing.T, srv *rsmtest.MinIOServer, proxy *rsmtest.FaultProxy, mb multipartBucket, direct *miniogo.Core, bucket string) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, mb)
	old := r.now.UnixMilli() - 3_600_000
	writeSegment(t, r.dir(), 0, seq(0, 16), same(old, 16), 1<<20) // 16 MiB: four parts
	writeSegment(t, r.dir(), 16, nil, nil, 0)

	var stopped atomic.Bool
	proxy.SetRule(func(req *http.Request) rsmtest.Fault {
		if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(req.URL.Path, ".log") && stopped.CompareAndSwap(false, true) {
			srv.Stop()
			return rsmtest.Reset
		}
		return rsmtest.Pass
	})
	if _, err := r.c.Sync(ctx); err == nil {
		t.Fatal("a pass whose store stopped mid-copy succeeded")
	}
	if !stopped.Load() {
		t.Fatal("the .log's upload never reached its second part")
	}
	rows, err := r.store.Segments(r.tp)
	if err != nil || len(rows) != 1 || rows[0].State != remotelog.DeleteSegmentStarted {
		t.Fatalf("rows after the outage: %v, %v; want the attempt's in DELETE_SEGMENT_STARTED", rows, err)
	}
	attempt := rows[0]
	logKey := r.mgr.Key(attempt, ".log")
	if !reflect.DeepEqual(r.localBases(), []int64{0, 16}) {
		t.Fatalf("uncopied segments deleted: %v", r.localBases())
	}

	srv.Restart(t)
	uploadsOf := func(key string) int {
		res, err := direct.ListMultipartUploads(ctx, bucket, key, "", "", "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, u := range res.Uploads {
			if u.Key == key {
				n++
			}
		}
		return n
	}
	if uploadsOf(logKey) != 1 {
		t.Fatalf("after the restart MinIO lists no upload of %s by its exact key: the outage left none to clean", logKey)
	}

	// A restarted copier meets a store that refuses aborts: the attempt
	// stays DELETE_SEGMENT_STARTED with its upload.
	r.c = newRigCopier(t, r)
	proxy.SetRule(func(req *http.Request) rsmtest.Fault {
		if req.Method == http.MethodDelete && req.URL.Query().Has("uploadId") {
			return rsmtest.Internal
		}
		return rsmtest.Pass
	})
	if _, err := r.c.Sync(ctx); err == nil || !strings.Contains(err.Error(), "abort the incomplete uploads of segment "+attempt.ID.String()) {
		t.Fatalf("a pass whose aborts all fail: %v; want the attempt's abort failure", err)
	}
	if got, err := r.store.Segment(r.tp, attempt.StartOffset, attempt.ID); err != nil || got.State != remotelog.DeleteSegmentStarted {
		t.Fatalf("the attempt's row after a failed abort: %v, %v; want DELETE_SEGMENT_STARTED", got.State, err)
	}
	if uploadsOf(logKey) != 1 {
		t.Fatalf("the attempt's upload went while every abort failed")
	}

	proxy.SetRule(nil)
	r.sync()
	r.sync()
	if got, err := r.store.Segment(r.tp, attempt.StartOffset, attempt.ID); err != nil || got.State != remotelog.DeleteSegmentFinished {
		t.Fatalf("the attempt's row: %v, %v; want DELETE_SEGMENT_FINISHED", got.State, err)
	}
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader-epoch-checkpoint", ".manifest.json"} {
		if n := uploadsOf(r.mgr.Key(attempt, suffix)); n != 0 {
			t.Errorf("%d incomplete uploads of the attempt's %s left", n, suffix)
		}
	}
	for _, k := range r.objects() {
		if strings.Contains(k, attempt.ID.String()) {
			t.Errorf("object of the failed attempt left: %s", k)
		}
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] != 1 {
		t.Fatalf("states after the retries: %v; want the segment copied", st)
	}
	if !reflect.DeepEqual(r.localBases(), []int64{16}) {
		t.Fatalf("local after the copy: %v", r.localBases())
	}
}
