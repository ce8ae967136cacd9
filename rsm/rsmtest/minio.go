package rsmtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"testing"

	"github.com/tierd/tierd/internal/minioproc"
)

// MinIO credentials of the test server.
const (
	AccessKey = minioproc.AccessKey
	SecretKey = minioproc.SecretKey
)

// MinIOServer is a MinIO server process on 127.0.0.1 with a temp data dir.
type MinIOServer struct {
	Endpoint string // host:port
	// Cert is the server's certificate when it speaks HTTPS
	// (StartMinIOTLS), else nil.
	Cert *TestCert
	srv  *minioproc.Server
}

// FindMinIO returns the path of the minio binary, "" when there is none
// (see minioproc.Find).
func FindMinIO() string { return minioproc.Find() }

// StartMinIO starts a MinIO server for the test and stops it at cleanup.
// Without a minio binary the test is skipped, or fails when $CI is set.
// Every server it starts has the same root credentials (AccessKey,
// SecretKey), which it sets as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
// in the process's environment, for good, over what the process started
// with (clients and tierd subprocesses find them there), so tests using it
// may run in parallel. A test that wants other credentials, or none, sets
// them with t.Setenv (ClearCredentials, CheckCases): those stay as the
// test set them, and t.Setenv restores the servers' after it.
func StartMinIO(t testing.TB) *MinIOServer { return startMinIO(t, nil) }

// StartMinIOTLS is StartMinIO serving HTTPS with a new self-signed
// certificate for 127.0.0.1 (NewTestCert), which the returned server's
// Cert holds for clients to trust.
func StartMinIOTLS(t testing.TB) *MinIOServer {
	t.Helper()
	skipWithoutMinIO(t)
	return startMinIO(t, NewTestCert(t))
}

func skipWithoutMinIO(t testing.TB) {
	t.Helper()
	if minioproc.Find() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("minio binary not found; CI requires it (see .ci/run)")
		}
		t.Skip("minio binary not found (set TIERD_MINIO_BIN or run .ci/run once)")
	}
}

// envVar is one environment variable as read: its value, and whether it
// was set at all.
type envVar struct {
	value string
	set   bool
}

// startEnv is the credentials' variables as the process started with
// them: startMinIO replaces them, but not what a test set instead.
var startEnv = func() map[string]envVar {
	m := map[string]envVar{}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		v, ok := os.LookupEnv(k)
		m[k] = envVar{v, ok}
	}
	return m
}()

// KMSKeyID is the KMS key of a server from StartMinIOKMS.
const KMSKeyID = "tierd-test-kms-key"

// StartMinIOKMS is StartMinIOTLS with a static KMS key (KMSKeyID, set
// through MINIO_KMS_SECRET_KEY), so that the server takes SSE-S3 and
// SSE-KMS; its TLS lets it take SSE-C too.
func StartMinIOKMS(t testing.TB) *MinIOServer {
	t.Helper()
	skipWithoutMinIO(t)
	key := make([]byte, 32)
	rand.Read(key)
	return startMinIOEnv(t, NewTestCert(t), []string{"MINIO_KMS_SECRET_KEY=" + KMSKeyID + ":" + base64.StdEncoding.EncodeToString(key)})
}

func startMinIO(t testing.TB, cert *TestCert) *MinIOServer { return startMinIOEnv(t, cert, nil) }

func startMinIOEnv(t testing.TB, cert *TestCert, env []string) *MinIOServer {
	t.Helper()
	skipWithoutMinIO(t)
	certs := ""
	if cert != nil {
		certs = cert.Dir
	}
	srv, err := minioproc.StartEnv(t.TempDir(), certs, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": AccessKey, "AWS_SECRET_ACCESS_KEY": SecretKey} {
		cur, set := os.LookupEnv(k)
		if (envVar{cur, set}) == startEnv[k] {
			os.Setenv(k, v)
		}
	}
	return &MinIOServer{Endpoint: srv.Endpoint, Cert: cert, srv: srv}
}

// CreateBucket makes a bucket on the server.
func (s *MinIOServer) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.srv.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the server, as a store outage: requests fail until Restart.
func (s *MinIOServer) Stop() { s.srv.Stop() }

// Restart starts a stopped (or running) server again over the same data
// dir and address (see minioproc.Server.Restart); it fails the test when
// the server does not come back.
func (s *MinIOServer) Restart(t testing.TB) {
	t.Helper()
	if err := s.srv.Restart(); err != nil {
		t.Fatal(err)
	}
}
