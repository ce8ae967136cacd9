package rsmtest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	testcerts "github.com/tierd/tierd/internal/testutil/certs"
)

// TestCert is a server certificate for 127.0.0.1 and localhost, made for
// one test with its own CA, so a client that trusts the CA (Pool, or
// CAFile in a bucket's ca_file setting) reaches a server presenting it.
type TestCert struct {
	// Dir holds public.crt and private.key (PEM), the names MinIO's
	// --certs-dir expects.
	Dir string
	// CAFile is the CA's certificate (PEM), for a bucket's ca_file.
	CAFile string
	// Cert is the certificate with its key, for a Go TLS server.
	Cert tls.Certificate
	// Pool holds the certificate, for a Go TLS client.
	Pool *x509.CertPool
}

// NewTestCert makes, with package testcerts, a CA and a server
// certificate signed by it for 127.0.0.1 and localhost (ECDSA P-256, valid
// for a day from an hour ago), and writes the server's pair to a temporary
// dir under MinIO's names; CAFile and Pool hold the CA.
func NewTestCert(t testing.TB) *TestCert {
	t.Helper()
	ca := testcerts.NewCA(t, t.TempDir(), "tierd-test")
	pair := ca.Server(t, "server")
	c := &TestCert{Dir: t.TempDir(), CAFile: ca.CAFile, Pool: ca.Pool()}
	for src, dst := range map[string]string{pair.CertFile: "public.crt", pair.KeyFile: "private.key"} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.Dir, dst), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if c.Cert, err = tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile); err != nil {
		t.Fatal(err)
	}
	return c
}
