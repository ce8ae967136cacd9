package s3_test

import (
	"context"
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

func newChecked(t *testing.T, srv *rsmtest.MinIOServer, bucket string) *s3.Bucket {
	t.Helper()
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.PathStyle = "http://"+srv.Endpoint, bucket, true
	b, err := s3.New(context.Background(), cfg, nil)
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
