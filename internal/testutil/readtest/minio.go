package readtest

import (
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// MinIOBucket starts a MinIO on 127.0.0.1 for the test (rsmtest.StartMinIO,
// which skips the test without the binary) and returns its bucket name,
// created, as an rsm.Bucket with the credentials set in the environment.
func MinIOBucket(t testing.TB, name string) rsm.Bucket {
	t.Helper()
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, name)
	t.Setenv("AWS_ACCESS_KEY_ID", rsmtest.AccessKey) // StartMinIO sets them for a *testing.T only
	t.Setenv("AWS_SECRET_ACCESS_KEY", rsmtest.SecretKey)
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, name, true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
