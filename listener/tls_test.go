package listener

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	"github.com/tierd/tierd/internal/tlsreload"
)

// tlsLog is a fake log of one partition with three records.
func tlsLog(t *testing.T) (*fakeLog, []batch.Record) {
	l := newFakeLog()
	recs := []batch.Record{rec("k0", "over tls 0", 1000), rec("k1", "over tls 1", 1001), rec("k2", "over tls 2", 1002)}
	l.appendRaw(t, "secure", 0, v2(t, batch.NewParams(0, 0), recs...))
	stored := l.topics["secure"].parts[0].entries[0].records
	return l, stored
}

// pingErr is the error of one franz-go Ping (ApiVersions to the seed
// broker) with opts: nil when the listener answered.
func pingErr(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestTLSListener serves over TLS and over mutual TLS with certificates
// made here. franz-go with kgo.DialTLSConfig reads every record (through
// Metadata's advertised address, the same host:port); a plaintext client
// and a client that does not trust the CA are refused; under mutual TLS a
// client without a certificate, or with one of another CA, is refused,
// counted under tls_handshake_failed and logged.
func TestTLSListener(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, dir, "ca"), testcerts.NewCA(t, dir, "other")
	srv, client, stranger := ca.Server(t, "server"), ca.Client(t, "client"), other.Client(t, "stranger")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	for _, mtls := range []bool{false, true} {
		t.Run(map[bool]string{false: "tls", true: "mtls"}[mtls], func(t *testing.T) {
			l, want := tlsLog(t)
			ts := startServer(t, l, nil, WithTLS(h.ServerConfig(mtls)))
			tp := TopicPartition{"secure", 0}
			good := testcerts.ClientConfig(t, ca, client)
			got := consumeAll(t, ts.addr, map[TopicPartition]int{tp: len(want)}, kgo.DialTLSConfig(good))
			for i, r := range got[tp] {
				if err := sameRecord(r, want[i]); err != nil {
					t.Error(err)
				}
			}
			if err := pingErr(t, ts.addr); err == nil {
				t.Error("a plaintext client was answered")
			}
			if err := pingErr(t, ts.addr, kgo.DialTLSConfig(testcerts.ClientConfig(t, other, testcerts.Pair{}))); err == nil {
				t.Error("a client trusting another CA connected")
			}
			noCert := pingErr(t, ts.addr, kgo.DialTLSConfig(testcerts.ClientConfig(t, ca, testcerts.Pair{})))
			strangerErr := pingErr(t, ts.addr, kgo.DialTLSConfig(testcerts.ClientConfig(t, ca, stranger)))
			if !mtls {
				if noCert != nil {
					t.Errorf("tls: a client trusting the CA: %v", noCert)
				}
				return
			}
			if noCert == nil || strangerErr == nil {
				t.Fatalf("mtls: client without a certificate: %v; with one of another CA: %v; want both refused", noCert, strangerErr)
			}
			waitFor(t, "the refusals counted", func() bool { return ts.closed(reasonTLS) >= 2 })
			if !strings.Contains(ts.logs.String(), "tls_handshake_failed") {
				t.Errorf("refusal not logged:\n%s", ts.logs.String())
			}
		})
	}
}

// TestKcatTLS: kcat (librdkafka) reads over TLS with
// security.protocol=SSL and ssl.ca.location, and over mutual TLS with
// ssl.certificate.location and ssl.key.location; without them under
// mutual TLS it fails.
func TestKcatTLS(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "server"), ca.Client(t, "client")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	ssl := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.CAFile}
	withCert := append(append([]string{}, ssl...), "-X", "ssl.certificate.location="+client.CertFile, "-X", "ssl.key.location="+client.KeyFile)
	for _, c := range []struct {
		name  string
		mtls  bool
		extra []string
		ok    bool
	}{
		{"tls", false, ssl, true},
		{"mtls", true, withCert, true},
		{"mtls without a client certificate", true, ssl, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, want := tlsLog(t)
			ts := startServer(t, l, nil, WithTLS(h.ServerConfig(c.mtls)))
			// Without a certificate librdkafka retries the handshake until
			// kcat's own end; a bounded session makes it give up.
			extra := append(append([]string{}, c.extra...), "-X", "socket.connection.setup.timeout.ms=3000", "-m", "10")
			got, err := kcatConsume(kcat, ts.addr, TopicPartition{"secure", 0}, extra...)
			if !c.ok {
				if err == nil {
					t.Fatalf("kcat without a client certificate succeeded, %d records", len(got))
				}
				t.Logf("refused as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("kcat read %d records, want %d", len(got), len(want))
			}
			for i := range got {
				if err := got[i].check(want[i], true); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestMTLSPrincipal: under mutual TLS the client certificate's subject,
// mapped by ssl.principal.mapping.rules, is the principal the ACLs see;
// a certificate no rule applies to is refused.
func TestMTLSPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv, client := ca.Server(t, "server"), ca.Client(t, "client")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := kafkaacl.NewSet([]kafkaacl.ACL{{ResourceType: kafkaacl.ResourceTopic, ResourceName: "secure", PatternType: kafkaacl.PatternLiteral,
		Principal: "User:CLIENT", Host: "*", Operation: kafkaacl.OpRead, Permission: kafkaacl.Allow}})
	l, want := tlsLog(t)
	ts := startServer(t, l, func(c *Config) { c.SSLPrincipalMappingRules = "RULE:^CN=([a-z]+).*$/$1/U, DEFAULT" },
		WithTLS(h.ServerConfig(true)), WithAuthorizer(staticAuthz{set}))
	good := testcerts.ClientConfig(t, ca, client)
	got := consumeAll(t, ts.addr, map[TopicPartition]int{{"secure", 0}: len(want)}, kgo.DialTLSConfig(good))
	if len(got[TopicPartition{"secure", 0}]) != len(want) {
		t.Fatalf("User:CLIENT read %d records", len(got[TopicPartition{"secure", 0}]))
	}
	l2, _ := tlsLog(t)
	strict := startServer(t, l2, func(c *Config) { c.SSLPrincipalMappingRules = "RULE:^CN=nobody$/x/" },
		WithTLS(h.ServerConfig(true)), WithAuthorizer(staticAuthz{set}))
	if err := pingErr(t, strict.addr, kgo.DialTLSConfig(good)); err == nil {
		t.Error("a certificate no mapping rule applies to was answered")
	}
	waitFor(t, "the refusal counted", func() bool { return strict.closed(reasonTLS) >= 1 })
}
