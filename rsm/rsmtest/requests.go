package rsmtest

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
)

// ExerciseRequests calls every method of b, an S3 bucket reached through
// proxy whose part size is 5 MiB, for tests of the requests it sends. It
// uploads p/small (1000 bytes: one PutObject) and p/large (11 MiB + 7: a
// CreateMultipartUpload, three UploadPart and a CompleteMultipartUpload),
// checks that whole and ranged reads, one across the first part boundary,
// return the bytes uploaded, lists, makes the upload of p/fails fail (the
// proxy answers every attempt at its part 2 with a 500, once it has read
// the part) and checks it was aborted, and deletes p/small. b must be an rsm.MultipartBucket.
func ExerciseRequests(t *testing.T, b rsm.Bucket, proxy *FaultProxy) {
	t.Helper()
	mb, ok := b.(rsm.MultipartBucket)
	if !ok {
		t.Fatalf("%s does not list multipart uploads", b.Name())
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 5))
	objects := map[string][]byte{"p/small": make([]byte, 1000), "p/large": make([]byte, 11<<20+7)}
	for key, data := range objects {
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if err := b.Upload(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("upload %s: %v", key, err)
		}
	}
	for key, data := range objects {
		n := int64(len(data))
		for _, rg := range [][2]int64{{0, -1}, {0, 100}, {5<<20 - 10, 20}, {n/2 - 10, 20}, {n - 3, -1}} {
			if rg[0]+max(rg[1], 0) > n {
				continue
			}
			rc, err := b.GetRange(ctx, key, rg[0], rg[1])
			if err != nil {
				t.Fatalf("GetRange(%s, %d, %d): %v", key, rg[0], rg[1], err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			want := data[rg[0]:]
			if rg[1] >= 0 {
				want = want[:rg[1]]
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("GetRange(%s, %d, %d): %d bytes, %v; want the %d bytes uploaded", key, rg[0], rg[1], len(got), err, len(want))
			}
		}
		if attrs, err := b.Attributes(ctx, key); err != nil || attrs.Size != n {
			t.Errorf("Attributes(%s) = %+v, %v; want size %d", key, attrs, err, n)
		}
	}
	var keys []string
	if err := b.Iter(ctx, "p/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(keys); !slices.Equal(keys, []string{"p/large", "p/small"}) {
		t.Errorf("Iter = %q", keys)
	}

	proxy.SetRule(func(r *http.Request) Fault {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(r.URL.Path, "/p/fails") {
			return InternalAfterBody
		}
		return Pass
	})
	err := b.Upload(ctx, "p/fails", bytes.NewReader(objects["p/large"]), int64(len(objects["p/large"])))
	proxy.SetRule(nil)
	if err == nil {
		t.Error("an upload whose part 2 always fails succeeded")
	}
	if ups, err := mb.IncompleteUploads(ctx, "p/"); err != nil || len(ups) != 0 {
		t.Errorf("after the failed upload: incomplete uploads %q, %v; want it aborted", ups, err)
	}
	if err := mb.AbortIncompleteUploads(ctx, "p/"); err != nil {
		t.Error(err)
	}
	if err := b.Delete(ctx, "p/small"); err != nil {
		t.Error(err)
	}
}

// RequireOps checks that reqs hold at least the S3 operations
// ExerciseRequests makes, and the extra ones (operation: least count), so
// that checks of their headers cannot pass on too few requests.
func RequireOps(t *testing.T, reqs []Request, extra map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, r := range reqs {
		got[r.Op()]++
	}
	want := map[string]int{
		"PutObject": 1, "CreateMultipartUpload": 2, "UploadPart": 4, "CompleteMultipartUpload": 1,
		"AbortMultipartUpload": 1, "GetObject": 9, "HeadObject": 2, "ListObjectsV2": 1,
		"ListMultipartUploads": 2, "DeleteObject": 1,
	}
	for op, n := range extra {
		want[op] = n
	}
	for op, least := range want {
		if got[op] < least {
			t.Errorf("%d %s requests recorded, want at least %d (all: %v)", got[op], op, least, got)
		}
	}
}

// AssertNoChecksums fails t for every request of reqs that carries a
// checksum header, a trailer or an aws-chunked body (see ChecksumHeaders,
// TrailerHeaders and ChunkedHeaders). With signedChunks an aws-chunked
// body is allowed when it has per-chunk signatures and no trailer
// (x-amz-content-sha256 STREAMING-AWS4-HMAC-SHA256-PAYLOAD): SigV4
// streaming signing, not a checksum.
func AssertNoChecksums(t *testing.T, reqs []Request, signedChunks bool) {
	t.Helper()
	for _, r := range reqs {
		found := map[string][]string{"checksum": r.ChecksumHeaders(), "trailer": r.TrailerHeaders()}
		if !signedChunks || r.Header.Get("X-Amz-Content-Sha256") != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" {
			found["aws-chunked"] = r.ChunkedHeaders()
		}
		for kind, h := range found {
			if len(h) > 0 {
				t.Errorf("%s %s carries %s headers %q", r.Op(), r.URL.Path, kind, h)
			}
		}
	}
}
