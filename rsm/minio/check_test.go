package minio_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

func newChecked(t *testing.T, srv *rsmtest.MinIOServer, bucket string) *minio.Bucket {
	t.Helper()
	cfg := minio.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.MaxRetries = srv.Endpoint, bucket, true, 1
	b, err := minio.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Check names a missing bucket, an unknown access key, a wrong secret key
// and missing credentials against a real MinIO, with where the
// credentials came from and never a secret.
func TestCheck(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "checked")
	rsmtest.RunCheckCases(t, "checked", func(t *testing.T, bucket string) rsm.Checker { return newChecked(t, srv, bucket) })
	t.Run("unreachable", func(t *testing.T) {
		cfg := minio.DefaultConfig()
		cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.MaxRetries = "127.0.0.1:1", "checked", true, 1
		b, err := minio.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Check(context.Background(), ""); err == nil || errors.Is(err, rsm.ErrMisconfigured) {
			t.Fatalf("Check of a closed port = %v, want a transport error", err)
		}
	})
}

// CreateBucket creates a missing bucket once, then says it exists.
func TestCreateBucket(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	b := newChecked(t, srv, "made-here")
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		created, err := b.CreateBucket(ctx)
		if err != nil || created != want {
			t.Fatalf("CreateBucket #%d = %v, %v; want %v", i+1, created, err, want)
		}
	}
	if err := b.Check(ctx, ""); err != nil {
		t.Fatalf("Check after CreateBucket: %v", err)
	}
}
