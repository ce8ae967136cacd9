package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSASL(t *testing.T) {
	for _, mech := range []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := newCluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "tierd", "right-pw"))
			pwFile := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pwFile, []byte("right-pw\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, sc := range []SASLConfig{
				{Mechanism: mech, Username: "tierd", Password: "right-pw"},
				{Mechanism: strings.ToLower(mech), Username: "tierd", PasswordFile: pwFile},
			} {
				v, err := newClient(t, testConfig(c, func(cfg *Config) { cfg.SASL = sc })).Describe(t.Context(), nil)
				if err != nil || v.ClusterID != testClusterID {
					t.Errorf("%s with the right password (file %q): %v", mech, sc.PasswordFile, err)
				}
			}

			// kfake closes the connection on a failed authentication.
			cl := newClient(t, testConfig(c, func(cfg *Config) {
				cfg.SASL = SASLConfig{Mechanism: mech, Username: "tierd", Password: "wrong-pw"}
				cfg.RequestTimeout = time.Second
			}))
			var err error
			within(t, time.Minute, func() { _, err = cl.Describe(t.Context(), nil) })
			if err == nil || !strings.Contains(err.Error(), "closed the connection during SASL authentication") || !strings.Contains(err.Error(), `sasl.username "tierd"`) {
				t.Errorf("wrong password: %v, want an error pointing at the SASL settings", err)
			}

			// Kafka answers SASL_AUTHENTICATION_FAILED with a message
			// (SaslServerAuthenticator), then closes.
			c.ControlKey(int16(kmsg.SASLAuthenticate), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				resp := kr.ResponseKind().(*kmsg.SASLAuthenticateResponse)
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
				return resp, nil, true
			})
			within(t, time.Minute, func() { _, err = cl.Describe(t.Context(), nil) })
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "Invalid username or password") {
				t.Errorf("Kafka's answer to a wrong password: %v, want SASL_AUTHENTICATION_FAILED with the broker's message", err)
			}
			if err != nil && strings.Contains(err.Error(), "wrong-pw") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestSASLPasswordFileProblemsFailNew(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(t.TempDir(), "missing"), empty} {
		cfg := DefaultConfig()
		cfg.BootstrapServers = []string{"127.0.0.1:9092"}
		cfg.SASL = SASLConfig{Mechanism: "PLAIN", Username: "u", PasswordFile: f}
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "password_file") {
			t.Errorf("password file %s: %v, want an error naming sasl.password_file", f, err)
		}
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	serverCert, caFile := selfSigned(t, dir)
	c := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))

	v, err := newClient(t, testConfig(c, func(cfg *Config) { cfg.TLS = TLSConfig{Enabled: true, CAFile: caFile} })).Describe(t.Context(), nil)
	if err != nil || v.ClusterID != testClusterID {
		t.Fatalf("TLS with the cluster's CA: %v", err)
	}

	cl := newClient(t, testConfig(c, func(cfg *Config) {
		cfg.TLS = TLSConfig{Enabled: true}
		cfg.RequestTimeout = time.Second
	}))
	within(t, time.Minute, func() { _, err = cl.Describe(t.Context(), nil) })
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) {
		t.Errorf("TLS without the CA: %v, want an unknown-authority error", err)
	}
}

// selfSigned makes a self-signed certificate for 127.0.0.1 and writes it
// as a CA file.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

func TestUnreachableBootstrapFailsWithinTimeout(t *testing.T) {
	// A port nobody listens on: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	// A listener that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, unanswered, until the listener closes
		}
	}()

	for _, addr := range []string{refused, silent.Addr().String()} {
		cfg := DefaultConfig()
		cfg.BootstrapServers = []string{addr}
		cfg.RequestTimeout = 300 * time.Millisecond
		cl := newClient(t, cfg)
		var derr, terr error
		var res map[string]IDStatus
		within(t, time.Minute, func() {
			_, derr = cl.Describe(t.Context(), nil)
			_, res, terr = cl.TopicIDs(t.Context(), []string{"gSnfpEbtQfSDpxM2lhEn9A"})
		})
		if derr == nil || !strings.Contains(derr.Error(), "Metadata") {
			t.Errorf("%s: Describe error %v, want one naming the Metadata request", addr, derr)
		}
		if terr == nil || res["gSnfpEbtQfSDpxM2lhEn9A"].State != IDUnknown {
			t.Errorf("%s: TopicIDs %v %v, want an error and IDUnknown", addr, res, terr)
		}
	}
}

func TestNewWithoutClusterOrWithBadConfig(t *testing.T) {
	if _, err := New(DefaultConfig()); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("New without bootstrap servers: %v, want ErrNotConfigured", err)
	}
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"no-port"}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "no-port") {
		t.Errorf("New with a bad address: %v", err)
	}
}
