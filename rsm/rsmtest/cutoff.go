package rsmtest

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// ExerciseCutOffUpload shows, on the real MinIO srv, what a store outage
// leaves of a multipart upload and that rsm.Manager.AbortUploadsOf
// clears it. b is an S3 bucket named bucket that reaches srv through
// proxy, with a 5 MiB part size, one part at a time and few retries. It
// uploads a copy's .log of 12 MiB; when the upload's second part
// arrives, the proxy stops MinIO, so the upload is cut off with its
// first part stored and the client's own abort of it fails. MinIO then
// restarts over the same data dir. The test checks that the upload is
// still stored (MinIO lists it by its exact key, with its parts); that
// the listings by prefix (the partition's) and of the whole bucket do
// not show it, so neither rsm.Manager.AbortUploads nor SweepPartition
// can find it (MinIO lists by prefix only the uploads of an exact key,
// and bucket-wide only those its running process began); that
// AbortUploadsOf aborts it and nothing of it is left (no upload by its
// exact key, its parts gone); and that it leaves alone an upload of a
// key that has the copy's key as a prefix.
func ExerciseCutOffUpload(t *testing.T, srv *MinIOServer, proxy *FaultProxy, b rsm.Bucket, bucket string) {
	t.Helper()
	ctx := context.Background()
	mb, ok := b.(rsm.MultipartBucket)
	if !ok {
		t.Fatalf("%s does not list multipart uploads", b.Name())
	}
	m, err := rsm.NewManager(b, rsm.Config{Prefix: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 3}
	meta := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: 4096, EndOffset: 8191}
	key := m.Key(meta, ".log")
	direct, err := miniogo.NewCore(srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	uploadsOf := func(k string) []string { // the upload ids MinIO lists for exactly k
		t.Helper()
		res, err := direct.ListMultipartUploads(ctx, bucket, k, "", "", "", 1000)
		if err != nil {
			t.Fatalf("list the uploads of %s: %v", k, err)
		}
		var ids []string
		for _, u := range res.Uploads {
			if u.Key == k {
				ids = append(ids, u.UploadID)
			}
		}
		return ids
	}

	proxy.SetRule(func(r *http.Request) Fault {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(r.URL.Path, "/"+key) {
			srv.Stop() // the store goes away mid-upload
			return Reset
		}
		return Pass
	})
	err = b.Upload(ctx, key, bytes.NewReader(make([]byte, 12<<20)), 12<<20)
	proxy.SetRule(nil)
	if err == nil {
		t.Fatal("an upload whose store stopped mid-way succeeded")
	}
	srv.Restart(t)

	ids := uploadsOf(key)
	if len(ids) != 1 {
		t.Fatalf("after the restart MinIO lists %d uploads of %s by its exact key, want the cut-off one", len(ids), key)
	}
	parts, err := direct.ListObjectParts(ctx, bucket, key, ids[0], 0, 1000)
	if err != nil || len(parts.ObjectParts) != 1 {
		t.Fatalf("the cut-off upload's parts: %d, %v; want its first part stored", len(parts.ObjectParts), err)
	}
	for _, prefix := range []string{"", m.PartitionPrefix(tp)} {
		ups, err := mb.IncompleteUploads(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ups, key) {
			t.Errorf("IncompleteUploads(%q) lists the cut-off upload: MinIO's listings now show what they did not", prefix)
		}
	}
	if n, err := m.AbortUploads(ctx, tp, map[remotelog.SegmentID]bool{meta.ID: true}); err != nil || n != 0 {
		t.Errorf("AbortUploads (one listing of the partition's uploads) = %d, %v; want it to miss the cut-off upload", n, err)
	}
	if ids := uploadsOf(key); len(ids) != 1 {
		t.Fatalf("uploads of %s before AbortUploadsOf: %v", key, ids)
	}

	// An upload of a key the copy's .log key is a prefix of stays.
	other := key + ".other"
	otherID, err := direct.NewMultipartUpload(ctx, bucket, other, miniogo.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.AbortMultipartUpload(ctx, bucket, other, otherID)

	n, err := m.AbortUploadsOf(ctx, meta)
	if err != nil || n != 1 {
		t.Fatalf("AbortUploadsOf = %d, %v; want the cut-off upload aborted", n, err)
	}
	if ids := uploadsOf(key); len(ids) != 0 {
		t.Errorf("uploads of %s after AbortUploadsOf: %v", key, ids)
	}
	if _, err := direct.ListObjectParts(ctx, bucket, key, ids[0], 0, 1000); miniogo.ToErrorResponse(err).Code != "NoSuchUpload" {
		t.Errorf("parts of the aborted upload: %v; want NoSuchUpload", err)
	}
	if _, err := b.Attributes(ctx, key); err == nil {
		t.Errorf("%s exists after its upload was cut off and aborted", key)
	}
	if got := uploadsOf(other); !slices.Equal(got, []string{otherID}) {
		t.Errorf("uploads of %s, which has the copy's key as a prefix: %v; want it left alone", other, got)
	}
	if n, err := m.AbortUploadsOf(ctx, meta); err != nil || n != 0 {
		t.Errorf("AbortUploadsOf again = %d, %v; want nothing left to abort", n, err)
	}
}
