package listener

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testcerts "github.com/tierd/tierd/internal/testutil/certs"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/internal/tlsreload"
)

// TestSASLKcat: kcat (librdkafka) logs in with SCRAM-SHA-256,
// SCRAM-SHA-512 and PLAIN over SASL_PLAINTEXT and reads what alice may; a
// wrong password and a topic she may not read fail.
func TestSASLKcat(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	ts := saslServer(t, nil)
	login := func(mech, pw string) []string {
		return []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=alice", "-X", "sasl.password=" + pw}
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} {
		recs, err := kcatConsume(kcat, ts.addr, TopicPartition{"orders", 0}, login(mech, "alice-pw")...)
		if err != nil || len(recs) != 1 || string(recs[0].value) != "v-orders" {
			t.Errorf("kcat %s: %+v %v", mech, recs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, append([]string{"-C", "-b", ts.addr, "-t", "orders", "-p", "0", "-o", "beginning", "-e", "-q",
		"-m", "5"}, login("SCRAM-SHA-256", "Zq9-not-hers")...)...).CombinedOutput()
	if err == nil || strings.Contains(string(out), "v-orders") {
		t.Errorf("kcat with a wrong password: %v\n%s", err, out)
	}
	if recs, err := kcatConsume(kcat, ts.addr, TopicPartition{"secret", 0}, login("SCRAM-SHA-256", "alice-pw")...); err == nil ||
		!strings.Contains(err.Error(), "uthoriz") {
		t.Errorf("kcat reading a topic alice may not: %+v %v", recs, err)
	}
}

const pySASL = `import sys
client, addr, mech, pw = sys.argv[1:5]
cafile = sys.argv[5] if len(sys.argv) > 5 else ""
proto = "SASL_SSL" if cafile else "SASL_PLAINTEXT"
n = 0
if client == "kafka-python":
    from kafka import KafkaConsumer, TopicPartition
    tls = {"ssl_cafile": cafile, "ssl_check_hostname": True} if cafile else {}
    c = KafkaConsumer(bootstrap_servers=addr, group_id=None, enable_auto_commit=False, security_protocol=proto,
                      sasl_mechanism=mech, sasl_plain_username="alice", sasl_plain_password=pw, api_version_auto_timeout_ms=10000, **tls)
    c.assign([TopicPartition("orders", 0)])
    c.seek_to_beginning()
    for _ in range(40):
        for tp, msgs in c.poll(timeout_ms=250).items():
            n += len(msgs)
        if n:
            break
else:
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    conf = {"bootstrap.servers": addr, "group.id": "t", "enable.auto.commit": False, "security.protocol": proto,
            "sasl.mechanisms": mech, "sasl.username": "alice", "sasl.password": pw}
    if cafile:
        conf["ssl.ca.location"] = cafile
    c = Consumer(conf)
    c.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    for _ in range(40):
        m = c.poll(0.25)
        if m is not None and not m.error():
            n += 1
            break
        if m is not None and m.error():
            raise SystemExit("consumer error: %s" % m.error())
c.close()
print(n)
`

// TestSASLPythonClients: kafka-python and confluent-kafka log in with
// SCRAM-SHA-512 and PLAIN and read what alice may.
func TestSASLPythonClients(t *testing.T) {
	t.Parallel()
	ts := saslServer(t, nil)
	script := filepath.Join(t.TempDir(), "sasl.py")
	os.WriteFile(script, []byte(pySASL), 0o600)
	for _, c := range []struct{ client, module string }{{"kafka-python", "kafka"}, {"confluent-kafka", "confluent_kafka"}} {
		t.Run(c.client, func(t *testing.T) {
			needPython(t, c.module)
			for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				out, err := exec.CommandContext(ctx, testtools.Python, script, c.client, ts.addr, mech, "alice-pw").CombinedOutput()
				cancel()
				if err != nil || strings.TrimSpace(string(out)) != "1" {
					t.Errorf("%s %s: %v\n%s", c.client, mech, err, out)
				}
			}
		})
	}
}

// TestSASLSSLClients: over SASL_SSL (TLS, then the login) kcat,
// kafka-python and confluent-kafka log in with SCRAM-SHA-512 and PLAIN,
// checking the server's certificate against its CA, and read what alice
// may; a wrong password fails.
func TestSASLSSLClients(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	srv := ca.Server(t, "server")
	h, err := tlsreload.New(tlsreload.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	ts := saslServer(t, nil, WithTLS(h.ServerConfig(false)))
	_, port, _ := net.SplitHostPort(ts.addr)
	addr := "localhost:" + port // the name the certificate has
	t.Run("kcat", func(t *testing.T) {
		kcat := needKcat(t)
		for _, c := range []struct {
			mech, pw string
			ok       bool
		}{{"SCRAM-SHA-512", "alice-pw", true}, {"PLAIN", "alice-pw", true}, {"SCRAM-SHA-512", "Zq9-not-hers", false}} {
			recs, err := kcatConsume(kcat, addr, TopicPartition{"orders", 0}, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+ca.CAFile,
				"-X", "sasl.mechanisms="+c.mech, "-X", "sasl.username=alice", "-X", "sasl.password="+c.pw, "-m", "10")
			if ok := err == nil && len(recs) == 1 && string(recs[0].value) == "v-orders"; ok != c.ok {
				t.Errorf("kcat SASL_SSL %s (password ok %v): %+v %v", c.mech, c.ok, recs, err)
			}
		}
	})
	script := filepath.Join(t.TempDir(), "sasl.py")
	os.WriteFile(script, []byte(pySASL), 0o600)
	for _, c := range []struct{ client, module string }{{"kafka-python", "kafka"}, {"confluent-kafka", "confluent_kafka"}} {
		t.Run(c.client, func(t *testing.T) {
			needPython(t, c.module)
			for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				out, err := exec.CommandContext(ctx, testtools.Python, script, c.client, addr, mech, "alice-pw", ca.CAFile).CombinedOutput()
				cancel()
				if err != nil || strings.TrimSpace(string(out)) != "1" {
					t.Errorf("%s SASL_SSL %s: %v\n%s", c.client, mech, err, out)
				}
			}
		})
	}
}
