package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/seglog"
)

// TestKafkaListeners: Kafka's listeners, advertised.listeners and
// listener.security.protocol.map give tierd two listeners: INTERNAL
// (PLAINTEXT) serves a client without a login, EXTERNAL (SASL_PLAINTEXT)
// refuses one and serves alice once she logs in; each advertises its own
// address in Metadata, and the metrics carry the listener's name.
func TestKafkaListeners(t *testing.T) {
	root := t.TempDir()
	l, err := seglog.Open(filepath.Join(root, "logs", "orders-0"), seglog.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		l.Append(seglog.Record{Value: []byte(fmt.Sprintf("o-%d", i))})
	}
	l.Close()
	pw := filepath.Join(root, "pw")
	os.WriteFile(pw, []byte("alice-pw\n"), 0o600)
	code, line, errOut := runCmd("sasl", "credential", "--user", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096", "--password-file", pw)
	if code != 0 {
		t.Fatal(errOut)
	}
	creds := filepath.Join(root, "credentials")
	os.WriteFile(creds, []byte(line), 0o600)
	internal, external, httpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	_, extPort, _ := net.SplitHostPort(external)
	cfgPath := filepath.Join(root, "tierd.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: "%s"}
http: {listen: "%s"}
kafka:
  listeners: "INTERNAL://%s,EXTERNAL://%s"
  advertised.listeners: "EXTERNAL://localhost:%s"
  listener.security.protocol.map: "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT"
  sasl.enabled.mechanisms: [SCRAM-SHA-256]
  sasl.credentials.file: %s
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freeAddr(t), httpAddr, internal, external, extPort, creds)), 0o644)
	bucketCreate(t, cfgPath)
	startServe(t, cfgPath)
	ctx := context.Background()

	brokers := func(addr string, opts ...kgo.Opt) (string, error) {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err != nil {
			return "", err
		}
		var out []string
		for _, b := range resp.Brokers {
			out = append(out, net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
		}
		return strings.Join(out, ","), nil
	}
	var got string
	testtools.WaitFor(t, "INTERNAL serving", func() bool { got, err = brokers(internal); return err == nil })
	if got != internal {
		t.Errorf("INTERNAL advertises %q, want %s", got, internal)
	}
	if _, err := brokers(external); err == nil {
		t.Errorf("EXTERNAL served a client that did not log in")
	}
	got, err = brokers(external, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()))
	if err != nil || got != "localhost:"+extPort {
		t.Errorf("EXTERNAL with alice's login: %q %v, want localhost:%s", got, err, extPort)
	}
	var resp *http.Response
	testtools.WaitFor(t, "the HTTP server", func() bool { resp, err = http.Get("http://" + httpAddr + "/metrics"); return err == nil })
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`tierd_kafka_sasl_logins_total{listener="EXTERNAL",mechanism="SCRAM-SHA-256",result="ok"} 1`, `listener="INTERNAL"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
