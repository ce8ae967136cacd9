package s3_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// TestChecksumHeaders records every request the bucket sends through the
// fault proxy to a real MinIO (rsmtest.ExerciseRequests: a PutObject, a
// multipart upload of three parts, one that fails and is aborted, reads
// checked against the bytes uploaded, lists, deletes), over HTTP and over
// TLS (a MinIO with a self-signed certificate, trusted through ca_file),
// with each checksum setting. With when_required no request carries a checksum header (not
// even Content-MD5: S3 requires it of none of the operations the bucket
// calls) nor an aws-chunked body or a trailer; with when_supported the
// uploads and GETs carry them, which shows the recording sees them.
func TestChecksumHeaders(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := "http"
		if secure {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var srv *rsmtest.MinIOServer
			var proxy *rsmtest.FaultProxy
			if secure {
				srv = rsmtest.StartMinIOTLS(t)
				proxy = rsmtest.StartFaultProxyTLS(t, srv.Endpoint, srv.Cert)
			} else {
				srv = rsmtest.StartMinIO(t)
				proxy = rsmtest.StartFaultProxy(t, srv.Endpoint)
			}
			for _, mode := range []string{s3.ChecksumWhenRequired, s3.ChecksumWhenSupported} {
				t.Run(mode, func(t *testing.T) {
					bucket := "checksum-" + strings.ReplaceAll(mode, "_", "-")
					srv.CreateBucket(t, bucket)
					cfg := s3.DefaultConfig()
					cfg.Endpoint, cfg.Bucket, cfg.PathStyle, cfg.PartSize = proxy.URL, bucket, true, 5<<20
					if mode != s3.ChecksumWhenRequired { // the default
						cfg.Checksum = mode
					}
					if secure {
						cfg.CAFile = srv.Cert.CAFile
					}
					b, err := s3.New(context.Background(), cfg, nil)
					if err != nil {
						t.Fatal(err)
					}
					proxy.RecordRequests(true)
					defer proxy.RecordRequests(false)
					if err := b.EnsureBucket(context.Background()); err != nil {
						t.Fatal(err)
					}
					rsmtest.ExerciseRequests(t, b, proxy)
					reqs := proxy.Requests()
					rsmtest.RequireOps(t, reqs, map[string]int{"HeadBucket": 1})
					if mode == s3.ChecksumWhenRequired {
						rsmtest.AssertNoChecksums(t, reqs, false)
					} else {
						assertChecksums(t, reqs, secure)
					}
				})
			}
		})
	}
}

func assertChecksums(t *testing.T, reqs []rsmtest.Request, secure bool) {
	t.Helper()
	has := func(lines []string, prefix string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	for _, r := range reqs {
		cs := r.ChecksumHeaders()
		switch r.Op() {
		case "PutObject", "UploadPart":
			if secure {
				// Over TLS the CRC32 goes in a trailer of an aws-chunked body.
				if !has(r.TrailerHeaders(), "x-amz-trailer: x-amz-checksum-crc32") || !has(r.ChunkedHeaders(), "content-encoding: aws-chunked") {
					t.Errorf("%s %s: no CRC32 trailer: %v", r.Op(), r.URL.Path, r.Header)
				}
			} else if !has(cs, "x-amz-checksum-crc32: ") {
				t.Errorf("%s %s: no x-amz-checksum-crc32 header: %v", r.Op(), r.URL.Path, r.Header)
			}
		case "CreateMultipartUpload":
			if !has(cs, "x-amz-checksum-algorithm: CRC32") {
				t.Errorf("%s %s: no x-amz-checksum-algorithm: %v", r.Op(), r.URL.Path, r.Header)
			}
		case "GetObject":
			if !has(cs, "x-amz-checksum-mode: ENABLED") {
				t.Errorf("%s %s: no x-amz-checksum-mode: %v", r.Op(), r.URL.Path, r.Header)
			}
		}
	}
}

// TestChecksumConfig checks the setting's default and the errors of bad
// checksum and ca_file values.
func TestChecksumConfig(t *testing.T) {
	if c := s3.DefaultConfig().Checksum; c != s3.ChecksumWhenRequired {
		t.Errorf("default checksum %q", c)
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func(*s3.Config)
		want string
	}{
		"empty checksum":   {func(c *s3.Config) { c.Checksum = "" }, `s3: checksum "": want when_required or when_supported`},
		"unknown checksum": {func(c *s3.Config) { c.Checksum = "always" }, `s3: checksum "always": want when_required or when_supported`},
		"ca_file on http":  {func(c *s3.Config) { c.Endpoint, c.CAFile = "http://127.0.0.1:9000", notPEM }, "ca_file is for https endpoints"},
		"missing ca_file":  {func(c *s3.Config) { c.CAFile = filepath.Join(dir, "missing.pem") }, "s3: ca_file: open"},
		"ca_file not PEM":  {func(c *s3.Config) { c.CAFile = notPEM }, "holds no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := s3.DefaultConfig()
			cfg.Endpoint, cfg.Bucket = "https://127.0.0.1:9000", "b"
			tc.edit(&cfg)
			_, err := s3.New(context.Background(), cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v; want an error with %q", err, tc.want)
			}
		})
	}
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Checksum = "https://127.0.0.1:9000", "b", s3.ChecksumWhenSupported
	if err := cfg.Validate(); err != nil {
		t.Errorf("when_supported: %v", err)
	}
}
