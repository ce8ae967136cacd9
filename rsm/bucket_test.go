package rsm_test

import (
	"context"
	"testing"

	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/memory"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

const largeObject = 12 << 20 // above the 5 MiB part size used below

// TestBucketAcceptance runs the one contract against every implementation,
// the S3 ones against a real MinIO server.
func TestBucketAcceptance(t *testing.T) {
	t.Run("memory", func(t *testing.T) { rsmtest.AcceptanceTest(t, memory.New(), largeObject) })
	t.Run("filesystem", func(t *testing.T) {
		b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		rsmtest.AcceptanceTest(t, b, largeObject)
	})
	t.Run("minio-go on MinIO", func(t *testing.T) {
		srv := rsmtest.StartMinIO(t)
		srv.CreateBucket(t, "accept-minio")
		cfg := minio.DefaultConfig()
		cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.PartSize = srv.Endpoint, "accept-minio", true, 5<<20
		b, err := minio.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rsmtest.AcceptanceTest(t, b, largeObject)
	})
	t.Run("aws-sdk-go-v2 on MinIO", func(t *testing.T) {
		srv := rsmtest.StartMinIO(t)
		srv.CreateBucket(t, "accept-s3")
		cfg := s3.DefaultConfig()
		cfg.Endpoint, cfg.Bucket, cfg.PathStyle, cfg.PartSize = "http://"+srv.Endpoint, "accept-s3", true, 5<<20
		b, err := s3.New(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rsmtest.AcceptanceTest(t, b, largeObject)
	})
}
