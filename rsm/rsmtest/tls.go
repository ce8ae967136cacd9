package rsmtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCert is a self-signed certificate for 127.0.0.1 and localhost, made
// for one test: its own root, so a client that trusts it (Pool, or CAFile
// in a bucket's ca_file setting) reaches a server presenting it.
type TestCert struct {
	// Dir holds public.crt and private.key (PEM), the names MinIO's
	// --certs-dir expects.
	Dir string
	// CAFile is Dir/public.crt.
	CAFile string
	// Cert is the certificate with its key, for a Go TLS server.
	Cert tls.Certificate
	// Pool holds the certificate, for a Go TLS client.
	Pool *x509.CertPool
}

// NewTestCert makes an ECDSA P-256 certificate valid for a day from an hour
// ago, for the IP 127.0.0.1 and the name localhost, and writes it to a
// temporary dir removed when the test ends.
func NewTestCert(t testing.TB) *TestCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tierd test 127.0.0.1"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c := &TestCert{Dir: t.TempDir(), Pool: x509.NewCertPool()}
	c.CAFile = filepath.Join(c.Dir, "public.crt")
	if err := os.WriteFile(c.CAFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "private.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if c.Cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if !c.Pool.AppendCertsFromPEM(certPEM) {
		t.Fatal("the test certificate does not parse")
	}
	return c
}
