package s3_test

import (
	"context"
	"testing"

	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// TestCutOffUploadAbortedByKey: through aws-sdk-go-v2, an upload cut off
// by a MinIO outage is left stored, invisible to MinIO's listings of a
// prefix or of the bucket after the restart, and aborted by its exact
// key (rsmtest.ExerciseCutOffUpload).
func TestCutOffUploadAbortedByKey(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	srv.CreateBucket(t, "cutoff")
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.PathStyle, cfg.PartSize, cfg.PartConcurrency = proxy.URL, "cutoff", true, 5<<20, 1
	b, err := s3.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsmtest.ExerciseCutOffUpload(t, srv, proxy, b, "cutoff")
}

// TestCloseStalledBody: through aws-sdk-go-v2, closing a body whose store
// stopped sending mid-body ends the Read waiting on it at once
// (rsmtest.ExerciseCloseStalledBody).
func TestCloseStalledBody(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	srv.CreateBucket(t, "stalled")
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.PathStyle = proxy.URL, "stalled", true
	b, err := s3.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsmtest.ExerciseCloseStalledBody(t, proxy, b)
}
