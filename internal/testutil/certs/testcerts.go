// Package testcerts makes certificates for tests at test time: a CA, a
// server certificate for 127.0.0.1 and localhost signed by it, and a
// client certificate signed by it (or by another CA), written as PEM
// files. Nothing here is for production use: keys are ECDSA P-256 and
// live for a day.
package testcerts

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

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	Cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string // its certificate, PEM
	dir    string
	serial int64
}

// Pair is a leaf certificate and its key, as PEM files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// NewCA makes a CA named name whose files go to dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, dir: dir, serial: 1, CAFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost
// (plus extra DNS names), files named after name.
func (ca *CA) Server(t testing.TB, name string, dnsNames ...string) Pair {
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, append([]string{"localhost"}, dnsNames...))
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) issue(t testing.TB, name string, usage x509.ExtKeyUsage, dns []string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns,
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), Cert: cert}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "PRIVATE KEY", kder)
	return p
}

// Pool is a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ClientConfig is a client TLS config trusting ca, presenting client
// when it has files.
func ClientConfig(t testing.TB, ca *CA, client Pair) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if client.CertFile != "" {
		kp, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
