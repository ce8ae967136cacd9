package minio_test

import (
	"testing"

	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestCutOffUploadAbortedByKey: through minio-go, an upload cut off by a
// MinIO outage is left stored, invisible to MinIO's listings of a prefix
// or of the bucket after the restart, and aborted by its exact key
// (rsmtest.ExerciseCutOffUpload).
func TestCutOffUploadAbortedByKey(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	srv.CreateBucket(t, "cutoff")
	cfg := minio.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.PartSize, cfg.PartConcurrency, cfg.MaxRetries = proxy.Endpoint, "cutoff", true, 5<<20, 1, 1
	b, err := minio.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsmtest.ExerciseCutOffUpload(t, srv, proxy, b, "cutoff")
}

// TestCloseStalledBody: through minio-go, closing a body whose store
// stopped sending mid-body ends the Read waiting on it at once
// (rsmtest.ExerciseCloseStalledBody).
func TestCloseStalledBody(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	proxy := rsmtest.StartFaultProxy(t, srv.Endpoint)
	srv.CreateBucket(t, "stalled")
	cfg := minio.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Insecure = proxy.Endpoint, "stalled", true
	b, err := minio.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsmtest.ExerciseCloseStalledBody(t, proxy, b)
}
