package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// tlsDaemon starts "tierd run" over a filesystem bucket with the tls:
// section given, the Kafka listener on, and returns the config path and
// the three addresses.
func tlsDaemon(t *testing.T, tlsYAML string) (cfgPath, grpcAddr, httpAddr, kafkaAddr string) {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	grpcAddr, httpAddr, kafkaAddr = freeAddr(t), freeAddr(t), freeAddr(t)
	cfgPath = writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), grpcAddr, httpAddr)
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "kafka:\n  listen: %s\ntls:\n%s", kafkaAddr, tlsYAML)
	f.Close()
	startServe(t, cfgPath)
	return cfgPath, grpcAddr, httpAddr, kafkaAddr
}

// tlsPeer makes one TLS handshake with addr and returns the common name of
// the certificate presented, or the handshake's error (after a read, so
// that a refused client certificate shows under TLS 1.3). It retries
// while nothing listens yet.
func tlsPeer(t *testing.T, addr string, c *tls.Config) (string, error) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			if time.Now().After(end) {
				t.Fatalf("%s never listened: %v", addr, err)
			}
			continue
		}
		c := c.Clone()
		c.ServerName = "127.0.0.1"
		conn := tls.Client(raw, c)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		err = conn.Handshake()
		cn := ""
		if err == nil {
			cn = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
			// The server speaks after the client under HTTP/2 and Kafka, so
			// a read only times out on an accepted certificate; a refused
			// one comes back as an alert.
			conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, rerr := conn.Read(make([]byte, 1)); rerr != nil && !isTimeout(rerr) && !strings.Contains(rerr.Error(), "EOF") {
				err = rerr
			}
		}
		conn.Close()
		return cn, err
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestRunTLS runs tierd with all three endpoints under mutual TLS: a
// client with a certificate of the client CA reaches each (gRPC through
// "tierd segments" with tls.ca_file and tls.client_cert_file, HTTP
// /-/ready, the Kafka listener with franz-go); a client without a
// certificate is refused by each. Then the certificate files are
// replaced and SIGHUP makes every endpoint present the new one.
func TestRunTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "first"), ca.Client(t, "client")
	tlsYAML := fmt.Sprintf("  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  grpc: mtls\n  http: mtls\n  kafka: mtls\n"+
		"  ca_file: %s\n  client_cert_file: %s\n  client_key_file: %s\n",
		srv.CertFile, srv.KeyFile, ca.CAFile, ca.CAFile, client.CertFile, client.KeyFile)
	cfgPath, grpcAddr, httpAddr, kafkaAddr := tlsDaemon(t, tlsYAML)
	withCert, noCert := testcerts.ClientConfig(t, ca, client), testcerts.ClientConfig(t, ca, testcerts.Pair{})

	for name, addr := range map[string]string{"grpc": grpcAddr, "http": httpAddr, "kafka": kafkaAddr} {
		if cn, err := tlsPeer(t, addr, withCert); err != nil || cn != "first" {
			t.Errorf("%s with a client certificate: %q, %v", name, cn, err)
		}
		if _, err := tlsPeer(t, addr, noCert); err == nil {
			t.Errorf("%s accepted a client without a certificate", name)
		}
	}
	code, out, errOut := runCmd("segments", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "remote metadata from the running tierd at "+grpcAddr) {
		t.Errorf("tierd segments over mTLS: exit %d\n%s%s", code, out, errOut)
	}
	// A tool that does not trust the server's CA says why it cannot
	// connect, instead of taking tierd for stopped.
	// (Its admin socket is elsewhere: the tool goes to fetch.listen, as
	// one on another host does.)
	untrusting := strings.Replace(readFile(t, cfgPath), "  ca_file: "+ca.CAFile+"\n", "", 1)
	untrusting = strings.Replace(untrusting, "fetch:\n", "fetch:\n  admin.socket: "+filepath.Join(t.TempDir(), "none.sock")+"\n", 1)
	os.WriteFile(cfgPath+".untrusting.yaml", []byte(untrusting), 0o644)
	code, out, errOut = runCmd("segments", "--config", cfgPath+".untrusting.yaml")
	if code != 1 || !strings.Contains(errOut, "but the TLS handshake failed") || !strings.Contains(errOut, "tls.ca_file") {
		t.Errorf("tierd segments not trusting the CA: exit %d\n%s%s", code, out, errOut)
	}
	// A tool without a client certificate says that this tierd requires
	// one and which settings give it, whether its config says grpc: mtls
	// or tls, instead of taking tierd for stopped.
	noClientCert := strings.Replace(readFile(t, cfgPath), "  client_cert_file: "+client.CertFile+"\n  client_key_file: "+client.KeyFile+"\n", "", 1)
	noClientCert = strings.Replace(noClientCert, "fetch:\n", "fetch:\n  admin.socket: "+filepath.Join(t.TempDir(), "none.sock")+"\n", 1)
	for name, file := range map[string]string{"mtls": noClientCert, "tls": strings.Replace(noClientCert, "  grpc: mtls\n", "  grpc: tls\n", 1)} {
		os.WriteFile(cfgPath+".nocert.yaml", []byte(file), 0o644)
		code, out, errOut = runCmd("segments", "--config", cfgPath+".nocert.yaml")
		if code != 1 || !strings.Contains(errOut, "the tierd at "+grpcAddr+" (fetch.listen) requires a client certificate") ||
			!strings.Contains(errOut, "tls.client_cert_file and tls.client_key_file") || strings.Contains(errOut, "no tierd answers") {
			t.Errorf("tierd segments without a client certificate, grpc: %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}}
	resp, err := hc.Get("https://" + httpAddr + "/-/ready")
	if err != nil {
		t.Fatalf("https /-/ready: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("https /-/ready: %d", resp.StatusCode)
	}
	// net/http answers a plaintext request on a TLS port with a 400.
	if resp, err := http.Get("http://" + httpAddr + "/-/ready"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain http answered %d", resp.StatusCode)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DialTLSConfig(withCert))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = cl.Ping(ctx)
	cancel()
	cl.Close()
	if err != nil {
		t.Errorf("franz-go over mTLS: %v", err)
	}

	// SIGHUP reloads the files. The test listens for SIGHUP itself too, so
	// that the signal never ends the test binary.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	second := ca.Server(t, "second")
	for from, to := range map[string]string{second.CertFile: srv.CertFile, second.KeyFile: srv.KeyFile} {
		data, _ := os.ReadFile(from)
		os.WriteFile(to, data, 0o600)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	<-hup
	for name, addr := range map[string]string{"grpc": grpcAddr, "http": httpAddr, "kafka": kafkaAddr} {
		var cn string
		for end := time.Now().Add(20 * time.Second); cn != "second" && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			cn, _ = tlsPeer(t, addr, withCert)
		}
		if cn != "second" {
			t.Errorf("%s after SIGHUP presents %q, want the new certificate", name, cn)
		}
	}
}

// TestHealthFollowsBucket asks tierd run's gRPC health service with
// grpcurl: NOT_SERVING while the bucket does not answer (an endpoint
// nothing listens on), SERVING with a reachable one; reflection lists the
// Admin service too.
func TestHealthFollowsBucket(t *testing.T) {
	grpcurl := testtools.Grpcurl(t)
	health := func(addr string) string {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			out, errOut, err := testtools.Run(grpcurl, "-plaintext", addr, "grpc.health.v1.Health/Check")
			if err == nil {
				var r struct{ Status string }
				json.Unmarshal([]byte(out), &r)
				return r.Status
			}
			if time.Now().After(end) {
				t.Fatalf("grpcurl health check: %v\n%s", err, errOut)
			}
		}
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	down := freeAddr(t)
	cfgPath := writeConfig(t, root, "minio:\n    endpoint: "+freeAddr(t)+"\n    bucket: nowhere\n    insecure: true\n    max_retries: 1", down, freeAddr(t))
	startServe(t, cfgPath)
	if st := health(down); st != "NOT_SERVING" {
		t.Errorf("unreachable bucket: %s", st)
	}
	root2 := t.TempDir()
	os.MkdirAll(filepath.Join(root2, "logs"), 0o755)
	up := freeAddr(t)
	startServe(t, writeConfig(t, root2, "filesystem:\n    dir: "+filepath.Join(root2, "bucket"), up, freeAddr(t)))
	if st := health(up); st != "SERVING" {
		t.Errorf("reachable bucket: %s", st)
	}
	out, errOut, err := testtools.Run(grpcurl, "-plaintext", up, "list")
	// The Admin service is not on TCP without authentication; the admin
	// socket serves it.
	if err != nil || strings.Contains(out, "tierd.v1.Admin") || !strings.Contains(out, "tierd.v1.RemoteFetch") {
		t.Errorf("grpcurl list: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = testtools.Run(grpcurl, "-plaintext", "-unix", filepath.Join(root2, "metadata", "admin", "tierd.sock"), "list")
	if err != nil || !strings.Contains(out, "tierd.v1.Admin") {
		t.Errorf("grpcurl list on the admin socket: %v\n%s%s", err, out, errOut)
	}
}

// TestRunTLSOnly runs tierd with every endpoint in tls mode: a client
// without a certificate is served by each (the handshake completes and the
// server's certificate is the configured one), and "tierd segments"
// reaches the gRPC API with tls.ca_file alone.
func TestRunTLSOnly(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv := ca.Server(t, "only")
	tlsYAML := fmt.Sprintf("  cert_file: %s\n  key_file: %s\n  grpc: tls\n  http: tls\n  kafka: tls\n  ca_file: %s\n", srv.CertFile, srv.KeyFile, ca.CAFile)
	cfgPath, grpcAddr, httpAddr, kafkaAddr := tlsDaemon(t, tlsYAML)
	noCert := testcerts.ClientConfig(t, ca, testcerts.Pair{})
	for name, addr := range map[string]string{"grpc": grpcAddr, "http": httpAddr, "kafka": kafkaAddr} {
		if cn, err := tlsPeer(t, addr, noCert); err != nil || cn != "only" {
			t.Errorf("%s without a client certificate: %q, %v", name, cn, err)
		}
	}
	if code, out, errOut := runCmd("segments", "--config", cfgPath); code != 0 || !strings.Contains(out, "the running tierd at "+grpcAddr) {
		t.Errorf("tierd segments over TLS: exit %d\n%s%s", code, out, errOut)
	}
	// A tool whose config has no tls: section says that this tierd speaks
	// TLS and what to add, instead of taking it for stopped. (Its admin
	// socket is elsewhere: the tool goes to fetch.listen, as one on
	// another host does.)
	plain, _, _ := strings.Cut(readFile(t, cfgPath), "tls:\n")
	plain = strings.Replace(plain, "fetch:\n", "fetch:\n  admin.socket: "+filepath.Join(t.TempDir(), "none.sock")+"\n", 1)
	os.WriteFile(cfgPath+".plain.yaml", []byte(plain), 0o644)
	for _, tool := range []string{"segments", "status"} {
		code, out, errOut := runCmd(tool, "--config", cfgPath+".plain.yaml")
		if code != 1 || !strings.Contains(errOut, "a tierd speaking TLS answers at "+grpcAddr) || !strings.Contains(errOut, "grpc: tls") ||
			!strings.Contains(errOut, "ca_file") || strings.Contains(errOut, "no tierd answers") {
			t.Errorf("tierd %s without a tls: section: exit %d\n%s%s", tool, code, out, errOut)
		}
	}
}
