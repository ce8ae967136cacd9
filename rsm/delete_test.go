package rsm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// s3Buckets returns, on one new MinIO server with a bucket named name,
// the bucket through minio-go and through aws-sdk-go-v2, both reaching
// the server through a recording proxy when proxied (the proxy is
// returned, else nil), and a minio-go Core for what the buckets cannot do
// (start an upload and leave it incomplete).
func s3Buckets(t *testing.T, name string, proxied bool) (map[string]rsm.Bucket, *miniogo.Core, *rsmtest.FaultProxy) {
	t.Helper()
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, name)
	endpoint := srv.Endpoint
	var proxy *rsmtest.FaultProxy
	if proxied {
		proxy = rsmtest.StartFaultProxy(t, srv.Endpoint)
		endpoint = proxy.Endpoint
	}
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = endpoint, name, true
	mb, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	scfg := s3.DefaultConfig()
	scfg.Endpoint, scfg.Bucket, scfg.PathStyle = "http://"+endpoint, name, true
	sb, err := s3.New(context.Background(), scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	core, err := miniogo.NewCore(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]rsm.Bucket{"minio-go": mb, "aws-sdk-go-v2": sb}, core, proxy
}

// TestAbortUploads: the incomplete uploads of the copies named, in the
// partition named, are aborted with one listing of the partition's
// uploads and one abort per such copy; those of another copy of the
// partition, and of a copy of the same id in another partition, are
// left. On the filesystem bucket (a crash's temporary files) and on
// MinIO through both S3 clients (uploads started and never completed).
func TestAbortUploads(t *testing.T) {
	ctx := context.Background()
	tp0, tp1 := remotelog.TopicPartition{Topic: "orders", Partition: 0}, remotelog.TopicPartition{Topic: "orders", Partition: 1}
	a := remotelog.SegmentMetadata{TopicPartition: tp0, ID: remotelog.NewSegmentID(), StartOffset: 0}
	bb := remotelog.SegmentMetadata{TopicPartition: tp0, ID: remotelog.NewSegmentID(), StartOffset: 10}
	c := remotelog.SegmentMetadata{TopicPartition: tp1, ID: a.ID, StartOffset: 0}
	check := func(t *testing.T, b rsm.Bucket, start func(key string)) {
		cb := rsmtest.Count(b)
		m, err := rsm.NewManager(cb, rsm.Config{Prefix: "tiered"})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{m.Key(a, ".log"), m.Key(a, ".index"), m.Key(bb, ".log"), m.Key(c, ".log")} {
			start(k)
		}
		cb.Reset()
		n, err := m.AbortUploads(ctx, tp0, map[remotelog.SegmentID]bool{a.ID: true})
		if err != nil || n != 1 {
			t.Fatalf("AbortUploads = %d, %v; want 1 copy", n, err)
		}
		if calls := cb.Calls(); calls["IncompleteUploads"] != 1 || calls["AbortIncompleteUploads"] != 1 || cb.Listings() != 2 {
			t.Errorf("calls %s; want one listing of the partition's uploads and one abort", cb)
		}
		left, err := b.(rsm.MultipartBucket).IncompleteUploads(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var stems []string
		for _, k := range left {
			base, id, _, ok := rsm.ParseKey(k)
			if !ok {
				t.Fatalf("upload of %s", k)
			}
			stems = append(stems, fmt.Sprintf("%s %d %s", filepath.Dir(k), base, id))
		}
		sort.Strings(stems)
		want := []string{fmt.Sprintf("tiered/orders-0 10 %s", bb.ID), fmt.Sprintf("tiered/orders-1 0 %s", a.ID)}
		if fmt.Sprint(stems) != fmt.Sprint(want) {
			t.Errorf("uploads left %v, want %v", stems, want)
		}
		if n, err := m.AbortUploads(ctx, tp0, nil); err != nil || n != 0 {
			t.Errorf("AbortUploads of no copy = %d, %v", n, err)
		}
	}
	t.Run("filesystem", func(t *testing.T) {
		dir := t.TempDir()
		b, err := filesystem.New(filesystem.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		check(t, b, func(key string) {
			p := filepath.Join(dir, filepath.FromSlash(key)) + ".123.tierd-upload" // what a crash mid-Upload leaves
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	})
	buckets, core, _ := s3Buckets(t, "abort", false)
	for name, b := range buckets {
		t.Run(name+" on MinIO", func(t *testing.T) {
			check(t, b, func(key string) {
				if _, err := core.NewMultipartUpload(ctx, "abort", key, miniogo.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			if err := b.(rsm.MultipartBucket).AbortIncompleteUploads(ctx, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// uploadCopies uploads n copies of one small segment of tp into b, all
// seven objects of each, eight uploads at a time, and returns their
// rows, oldest first.
func uploadCopies(tb testing.TB, b rsm.Bucket, m *rsm.Manager, tp remotelog.TopicPartition, n int) []remotelog.SegmentMetadata {
	tb.Helper()
	rows := make([]remotelog.SegmentMetadata, n)
	keys := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				if err := b.Upload(context.Background(), k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range rows {
		rows[i] = remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: int64(10 * i),
			EndOffset: int64(10*i + 9), State: remotelog.CopySegmentFinished}
		for _, suffix := range rsmtest.CopySuffixes {
			select {
			case keys <- m.Key(rows[i], suffix):
			case err := <-errs:
				tb.Fatal(err)
			}
		}
	}
	close(keys)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	return rows
}

// TestDeleteRequestsPerCopyOnMinIO deletes the older half of 10 and of
// 100 copies of one partition on MinIO (aws-sdk-go-v2 through a
// recording proxy) through the manager's delete path and counts the S3
// requests: seven DeleteObject per copy, and the same number of
// ListMultipartUploads for both (the partition's, once), where one per
// copy was sent before.
func TestDeleteRequestsPerCopyOnMinIO(t *testing.T) {
	ctx := context.Background()
	buckets, _, proxy := s3Buckets(t, "deletes", true)
	b := buckets["aws-sdk-go-v2"]
	lists := map[int]int{}
	for i, n := range []int{10, 100} {
		m, err := rsm.NewManager(b, rsm.Config{Prefix: fmt.Sprintf("run%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		rows := uploadCopies(t, b, m, remotelog.TopicPartition{Topic: "orders", Partition: 0}, n)
		proxy.RecordRequests(true)
		start := time.Now()
		err = deleteCopies(ctx, m, rows[:n/2])
		took := time.Since(start)
		proxy.RecordRequests(false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d copies: deleted %d in %s, %s per copy", n, n/2, took, took/time.Duration(n/2))
		ops := map[string]int{}
		for _, r := range proxy.Requests() {
			ops[r.Op()]++
		}
		if ops["DeleteObject"] != 7*n/2 {
			t.Errorf("%d copies: %d DeleteObject to delete %d copies, want 7 each (%v)", n, ops["DeleteObject"], n/2, ops)
		}
		lists[n] = ops["ListMultipartUploads"] + ops["ListObjectsV2"]
		if len(ops) != 2 || lists[n] < 1 {
			t.Errorf("%d copies: requests %v, want only DeleteObject and ListMultipartUploads", n, ops)
		}
		left := rsmtest.Snapshot(t, b, m.PartitionPrefix(rows[0].TopicPartition))
		if len(left) != 7*(n-n/2) {
			t.Errorf("%d copies: %d objects left, want %d", n, len(left), 7*(n-n/2))
		}
	}
	if lists[10] != lists[100] {
		t.Errorf("listings grew with the copies deleted: %v", lists)
	}
}
