package minio_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestNoChecksumHeaders records every request the bucket sends through the
// fault proxy to a real MinIO (rsmtest.ExerciseRequests), over HTTP and
// over TLS (a MinIO with a self-signed certificate, trusted through
// ca_file), and checks that minio-go, as configured here, adds no checksum
// header and no trailer to any of them: its TrailingHeaders option is off,
// and without it minio-go sends neither. Over HTTP its uploads are
// aws-chunked with per-chunk SigV4 signatures and no trailer; over TLS
// they are plain bodies.
func TestNoChecksumHeaders(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := "http"
		if secure {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var srv *rsmtest.MinIOServer
			var proxy *rsmtest.FaultProxy
			cfg := minio.DefaultConfig()
			if secure {
				srv = rsmtest.StartMinIOTLS(t)
				proxy = rsmtest.StartFaultProxyTLS(t, srv.Endpoint, srv.Cert)
				cfg.CAFile = srv.Cert.CAFile
			} else {
				srv = rsmtest.StartMinIO(t)
				proxy = rsmtest.StartFaultProxy(t, srv.Endpoint)
				cfg.Insecure = true
			}
			srv.CreateBucket(t, "checksum")
			// Two attempts at the part that always fails are enough.
			cfg.Endpoint, cfg.Bucket, cfg.PartSize, cfg.MaxRetries = proxy.Endpoint, "checksum", 5<<20, 2
			b, err := minio.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			proxy.RecordRequests(true)
			defer proxy.RecordRequests(false)
			rsmtest.ExerciseRequests(t, b, proxy)
			reqs := proxy.Requests()
			rsmtest.RequireOps(t, reqs, nil)
			rsmtest.AssertNoChecksums(t, reqs, !secure)
			for _, r := range reqs {
				if op := r.Op(); (op == "PutObject" || op == "UploadPart") && (len(r.ChunkedHeaders()) > 0) != !secure {
					t.Errorf("%s over %s: aws-chunked headers %q, want them only over HTTP", op, name, r.ChunkedHeaders())
				}
			}
		})
	}
}

// TestCAFileConfig checks the errors of bad ca_file values.
func TestCAFileConfig(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func(*minio.Config)
		want string
	}{
		"ca_file with insecure": {func(c *minio.Config) { c.Insecure, c.CAFile = true, "/x.pem" }, "minio: ca_file is for TLS; endpoint 127.0.0.1:9000 is plain http"},
		"ca_file with http URL": {func(c *minio.Config) { c.Endpoint, c.CAFile = "http://127.0.0.1:9000", "/x.pem" }, "minio: ca_file is for TLS"},
		"missing ca_file":       {func(c *minio.Config) { c.CAFile = notPEM + ".missing" }, "minio: ca_file: open"},
		"ca_file not PEM":       {func(c *minio.Config) { c.CAFile = notPEM }, "holds no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := minio.DefaultConfig()
			cfg.Endpoint, cfg.Bucket = "127.0.0.1:9000", "b"
			tc.edit(&cfg)
			_, err := minio.New(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v; want an error with %q", err, tc.want)
			}
		})
	}
}
