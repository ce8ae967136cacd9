package tlsreload_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	"github.com/tierd/tierd/internal/tlsreload"
)

// handshake runs one handshake over loopback TCP and returns the server's
// error, the client's error (after a read, so a TLS 1.3 client learns of a
// rejected certificate) and the certificate the client saw.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error, seen string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		raw, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		s := tls.Server(raw, server)
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("x"))
		}
		s.Close()
		done <- err
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		seen = c.ConnectionState().PeerCertificates[0].Subject.CommonName
		buf := make([]byte, 1)
		_, clientErr = c.Read(buf)
	}
	c.Close()
	return <-done, clientErr, seen
}

func TestHandshakes(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	other := testcerts.NewCA(t, dir, "other")
	srv := ca.Server(t, "server")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	if h.Leaf().Subject.CommonName != "server" {
		t.Errorf("leaf %v", h.Leaf().Subject)
	}
	good, stranger := ca.Client(t, "client"), other.Client(t, "stranger")
	cases := []struct {
		name       string
		mtls       bool
		client     *tls.Config
		wantRefuse bool
	}{
		{"tls", false, testcerts.ClientConfig(t, ca, testcerts.Pair{}), false},
		{"tls, untrusted server", false, testcerts.ClientConfig(t, other, testcerts.Pair{}), true},
		{"mtls", true, testcerts.ClientConfig(t, ca, good), false},
		{"mtls, no client cert", true, testcerts.ClientConfig(t, ca, testcerts.Pair{}), true},
		{"mtls, client cert of another CA", true, testcerts.ClientConfig(t, ca, stranger), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.client.ServerName = "localhost"
			serr, cerr, seen := handshake(t, h.ServerConfig(c.mtls), c.client)
			if c.wantRefuse {
				if serr == nil && cerr == nil {
					t.Fatal("handshake succeeded; want it refused")
				}
				return
			}
			if serr != nil || cerr != nil || seen != "server" {
				t.Fatalf("server %v, client %v, saw %q", serr, cerr, seen)
			}
		})
	}
}

// Reload makes new handshakes use the new files; a reload of broken files
// fails and keeps the old ones.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	first := ca.Server(t, "first")
	h, err := tlsreload.New(tlsreload.Files{CertFile: first.CertFile, KeyFile: first.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	sc := h.ServerConfig(false) // one config for the listener's life
	client := testcerts.ClientConfig(t, ca, testcerts.Pair{})
	client.ServerName = "localhost"
	if serr, cerr, seen := handshake(t, sc, client); seen != "first" {
		t.Fatalf("saw %q (server %v, client %v)", seen, serr, cerr)
	}
	second := ca.Server(t, "second")
	copyFile(t, second.CertFile, first.CertFile)
	copyFile(t, second.KeyFile, first.KeyFile)
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, seen := handshake(t, sc, client); seen != "second" {
		t.Fatalf("after reload saw %q, want second", seen)
	}
	os.WriteFile(first.CertFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600)
	if err := h.Reload(); err == nil || !strings.Contains(err.Error(), first.CertFile) {
		t.Fatalf("reload of a broken cert: %v", err)
	}
	if serr, cerr, seen := handshake(t, sc, client); serr != nil || cerr != nil || seen != "second" {
		t.Fatalf("after a failed reload: %v %v %q", serr, cerr, seen)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv := ca.Server(t, "server")
	if _, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: ca.CAFile}); err == nil {
		t.Error("a cert file as key accepted")
	}
	if _, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: srv.KeyFile}); !errors.Is(err, tlsreload.ErrNoCertificates) {
		t.Errorf("a key as client CA file: %v", err)
	}
	if _, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CertFile: srv.CertFile}); err == nil {
		t.Error("client cert without key accepted")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
