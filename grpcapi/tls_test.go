package grpcapi

import (
	"context"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/internal/tlsreload"
)

// healthOver dials addr with opts and returns the error of one health
// Check (nil when it answered SERVING).
func healthOver(t *testing.T, addr string, opts ...DialOption) error {
	t.Helper()
	c, err := Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Health().Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v", resp.Status)
	}
	return err
}

// TestTLS serves over TLS and over mutual TLS, with certificates made
// here: a client trusting the CA connects; a plaintext client, a client
// trusting another CA and, under mutual TLS, a client without a
// certificate or with one of another CA are refused. grpcurl, when
// installed, does the same.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, dir, "ca"), testcerts.NewCA(t, dir, "other")
	srv, client, stranger := ca.Server(t, "server"), ca.Client(t, "client"), other.Client(t, "stranger")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	trusting := func(c *testcerts.CA, p testcerts.Pair) DialOption {
		return WithClientTLS(testcerts.ClientConfig(t, c, p))
	}
	for _, mtls := range []bool{false, true} {
		name := map[bool]string{false: "tls", true: "mtls"}[mtls]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, DefaultConfig(), WithTLS(h.ServerConfig(mtls)))
			if err := healthOver(t, e.addr, trusting(ca, client)); err != nil {
				t.Errorf("client with the CA and a certificate: %v", err)
			}
			if err := healthOver(t, e.addr); err == nil {
				t.Error("plaintext client answered")
			}
			if err := healthOver(t, e.addr, trusting(other, testcerts.Pair{})); err == nil {
				t.Error("a client trusting another CA connected")
			}
			err := healthOver(t, e.addr, trusting(ca, testcerts.Pair{}))
			if mtls && err == nil {
				t.Error("mtls: a client without a certificate was served")
			} else if !mtls && err != nil {
				t.Errorf("tls: client trusting the CA: %v", err)
			}
			if err := healthOver(t, e.addr, trusting(ca, stranger)); mtls && err == nil {
				t.Error("mtls: a client certificate of another CA was accepted")
			}
		})
	}
}

// TestGrpcurlTLS lists the services with grpcurl over TLS and mutual TLS,
// and checks that grpcurl without a client certificate is refused under
// mutual TLS.
func TestGrpcurlTLS(t *testing.T) {
	grpcurl := testtools.Grpcurl(t)
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "server"), ca.Client(t, "client")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := newEnv(t, DefaultConfig(), WithTLS(h.ServerConfig(false)))
	if out, errOut, err := testtools.Run(grpcurl, "-cacert", ca.CAFile, tlsSrv.addr, "list"); err != nil || !strings.Contains(out, "tierd.v1.RemoteFetch") {
		t.Errorf("grpcurl over TLS: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := testtools.Run(grpcurl, "-plaintext", tlsSrv.addr, "list"); err == nil {
		t.Error("grpcurl -plaintext listed a TLS server")
	}
	mtlsSrv := newEnv(t, DefaultConfig(), WithTLS(h.ServerConfig(true)))
	args := []string{"-cacert", ca.CAFile, "-cert", client.CertFile, "-key", client.KeyFile, mtlsSrv.addr, "list"}
	if out, errOut, err := testtools.Run(grpcurl, args...); err != nil || !strings.Contains(out, "tierd.v1.RemoteFetch") {
		t.Errorf("grpcurl over mutual TLS: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := testtools.Run(grpcurl, "-cacert", ca.CAFile, mtlsSrv.addr, "list"); err == nil {
		t.Errorf("grpcurl without a client certificate listed a mutual-TLS server: %s", out)
	}
}
