package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	saslplain "github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// TestKafkaListenerLoginsByCluster: with kafka.bootstrap_servers and no
// sasl.credentials.file, the Kafka listener's logins are relayed to the
// cluster (an in-process Kafka cluster with SASL): a SCRAM user the
// cluster has and a PLAIN user log in with their passwords (franz-go,
// kcat, kafka-python, confluent-kafka), wrong ones are refused; a SCRAM user deleted in the cluster cannot log in again;
// a connection logged in before goes on while the cluster is down, but a
// new login fails, and the log says the cluster could not be asked.
func TestKafkaListenerLoginsByCluster(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "tierd", "tierd-secret-pw"), kfake.User("PLAIN", "bob", "bob-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(kc.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "tierd", Pass: "tierd-secret-pw"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := context.Background()
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}}); err != nil || res["alice"].Err != nil {
		t.Fatalf("create alice: %v %v", err, res)
	}

	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	pw := filepath.Join(root, "pw")
	os.WriteFile(pw, []byte("tierd-secret-pw\n"), 0o600)
	kafkaAddr := freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 0
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: "%s"}
http: {listen: ""}
kafka:
  bootstrap_servers: [%s]
  request_timeout: 2s
  sasl: {mechanism: SCRAM-SHA-256, username: tierd, password_file: %s}
  listen: %s
  sasl.enabled.mechanisms: [SCRAM-SHA-512, PLAIN]
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freeAddr(t), kc.ListenAddrs()[0], pw, kafkaAddr)), 0o644)
	bucketCreate(t, cfgPath)
	var log syncBuffer
	startServeLog(t, cfgPath, &log)

	connect := func(m sasl.Mechanism) (*kgo.Client, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(0), kgo.SASL(m))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err != nil {
			cl.Close()
			return nil, err
		}
		return cl, nil
	}
	login := func(m sasl.Mechanism) error {
		cl, err := connect(m)
		if cl != nil {
			cl.Close()
		}
		return err
	}
	testtools.WaitFor(t, "the listener up", func() bool { return login(saslplain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()) == nil })
	if err := login(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()); err != nil {
		t.Errorf("alice (SCRAM-SHA-512, a user of the cluster): %v", err)
	}
	for name, m := range map[string]sasl.Mechanism{
		"alice, wrong password": scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(),
		"bob, wrong password":   saslplain.Auth{User: "bob", Pass: "nope"}.AsMechanism(),
		"mallory":               scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
	} {
		if err := login(m); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// librdkafka sends its own nonce in front of the server's again in
	// its client-final message: the cluster, not tierd, judges it.
	if kcat, err := exec.LookPath("kcat"); err == nil {
		for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
			user, pass := "alice", "alice-pw"
			if mech == "PLAIN" {
				user, pass = "bob", "bob-pw"
			}
			kctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			out, err := exec.CommandContext(kctx, kcat, "-L", "-b", kafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT",
				"-X", "sasl.mechanisms="+mech, "-X", "sasl.username="+user, "-X", "sasl.password="+pass, "-m", "10").CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), "broker") {
				t.Errorf("kcat %s through the relay: %v\n%s", mech, err, out)
			}
		}
	}
	// kafka-python and confluent-kafka log in through the relay too.
	script := filepath.Join(t.TempDir(), "login.py")
	os.WriteFile(script, []byte(pyRelayLogin), 0o600)
	for _, c := range []struct{ client, module string }{{"kafka-python", "kafka"}, {"confluent-kafka", "confluent_kafka"}} {
		testtools.NeedPython(t, c.module)
		for _, login := range [][3]string{{"SCRAM-SHA-512", "alice", "alice-pw"}, {"PLAIN", "bob", "bob-pw"}} {
			pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			out, err := exec.CommandContext(pctx, testtools.Python, script, c.client, kafkaAddr, login[0], login[1], login[2]).CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), "logged in") {
				t.Errorf("%s %s through the relay: %v\n%s", c.client, login[0], err, out)
			}
		}
	}
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil || res["alice"].Err != nil {
		t.Fatalf("delete alice: %v %v", err, res)
	}
	if err := login(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()); err == nil {
		t.Errorf("alice logged in after her deletion in the cluster")
	}

	kept, err := connect(saslplain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism())
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	// Its connections (to the seed and to the broker it learned of) are
	// all logged in before the outage.
	brokers := append(kept.SeedBrokers(), kept.DiscoveredBrokers()...)
	for _, b := range brokers {
		if _, err := b.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
	}
	kc.Close()
	start := time.Now()
	if err := login(saslplain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()); err == nil {
		t.Errorf("a new login while the cluster is down")
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("a login with the cluster down took %v (request_timeout 2s)", d)
	}
	for _, b := range brokers {
		if _, err := b.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Errorf("a connection logged in before the outage: %v", err)
		}
	}
	if !strings.Contains(log.String(), "PLAIN logins are relayed to the Kafka cluster over plaintext") {
		t.Errorf("no warning that PLAIN passwords go to the cluster in the clear (kafka.tls off):\n%s", log.String())
	}
	if !strings.Contains(log.String(), "could not be asked") {
		t.Errorf("the log does not say the cluster could not be asked:\n%s", log.String())
	}
}

// pyRelayLogin logs in with a Python client and asks for the topics
// (a Metadata request after the login).
const pyRelayLogin = `import sys
client, addr, mech, user, pw = sys.argv[1:6]
if client == "kafka-python":
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=addr, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
                      sasl_plain_username=user, sasl_plain_password=pw, api_version_auto_timeout_ms=10000)
    c.topics()
    c.close()
else:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": addr, "group.id": "t", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanisms": mech, "sasl.username": user, "sasl.password": pw})
    c.list_topics(timeout=20)
    c.close()
print("logged in")
`
