package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tierd/tierd/config"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/seglog"
)

// TestKafkaListenerACLsFromCluster: tierd run with acls source cluster
// reads the ACLs of a Kafka cluster (kfake with SASL and ACLs, tierd
// logged in as a super user) and applies them on its Kafka listener: the
// anonymous client the cluster lets read orders reads it through tierd,
// and sees no other topic; a revoke in the cluster refuses it within the
// refresh interval.
func TestKafkaListenerACLsFromCluster(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("acl-test"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "tierd", "tierd-secret-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	admin, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "tierd", Pass: "tierd-secret-pw"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "orders", NumPartitions: 1, ReplicationFactor: 1},
		{Topic: "secret", NumPartitions: 1, ReplicationFactor: 1}}
	if _, err := ct.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	grant := kmsg.NewPtrCreateACLsRequest()
	grant.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders",
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:ANONYMOUS", Host: "*",
		Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if resp, err := grant.RequestWith(ctx, admin); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("grant: %v %+v", err, resp)
	}

	root := t.TempDir()
	for _, topic := range []string{"orders", "secret"} {
		l, err := seglog.Open(filepath.Join(root, "logs", topic+"-0"), seglog.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			l.Append(seglog.Record{Value: []byte(fmt.Sprintf("%s-%d", topic, i))})
		}
		l.Close()
	}
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
  sasl: {mechanism: SCRAM-SHA-256, username: tierd, password_file: %s}
  listen: %s
acls:
  source: cluster
  refresh_interval: 1s
  max_stale: 1m
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freeAddr(t), kc.ListenAddrs()[0], pw, kafkaAddr)), 0o644)
	bucketCreate(t, cfgPath)
	startServe(t, cfgPath)

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	testtools.WaitFor(t, "orders' records through tierd's listener", func() bool {
		fctx, cancel := context.WithTimeout(ctx, 500e6)
		defer cancel()
		cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return len(got) >= 10
	})
	if got[0] != "orders-0" || got[9] != "orders-9" {
		t.Fatalf("records %v", got)
	}
	describe := func(topic string) int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	all := kmsg.NewPtrMetadataRequest()
	resp, err := all.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, rt := range resp.Topics {
		listed = append(listed, *rt.Topic)
	}
	if strings.Join(listed, ",") != "orders" {
		t.Errorf("topics listed to the anonymous client: %v, want only orders", listed)
	}
	if code := describe("secret"); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("secret named: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	revoke := kmsg.NewPtrDeleteACLsRequest()
	revoke.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: kmsg.StringPtr("orders"),
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	if _, err := revoke.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	testtools.WaitFor(t, "the revoke applied by tierd", func() bool { return describe("orders") == kerr.TopicAuthorizationFailed.Code })
}

// TestKafkaListenerSASL: tierd run with sasl.enabled.mechanisms and a
// credentials file made by "tierd sasl credential", and an ACL file:
// alice logs in with SCRAM and reads what the file lets her; a wrong
// password is refused; a new password written to the file and "tierd
// config reload" applies to the next login; a file others can read is
// refused at start.
func TestKafkaListenerSASL(t *testing.T) {
	hup := make(chan os.Signal, 8) // this process receives the reload's SIGHUP
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	root := t.TempDir()
	credLine := func(pw string) string {
		p := filepath.Join(root, "pw")
		os.WriteFile(p, []byte(pw+"\n"), 0o600)
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"sasl", "credential", "--user", "alice", "--mechanism", "SCRAM-SHA-256",
			"--iterations", "4096", "--password-file", p}, &out, &errOut); code != 0 {
			t.Fatalf("sasl credential: %d %s", code, errOut.String())
		}
		if strings.Contains(out.String(), pw) {
			t.Fatalf("the password is in the credential line: %s", out.String())
		}
		return out.String()
	}
	creds := filepath.Join(root, "credentials")
	os.WriteFile(creds, []byte(credLine("first-pw-of-alice")), 0o600)
	aclFile := filepath.Join(root, "acls")
	os.WriteFile(aclFile, []byte("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"+
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"), 0o600)
	l, err := seglog.Open(filepath.Join(root, "logs", "orders-0"), seglog.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		l.Append(seglog.Record{Value: []byte(fmt.Sprintf("o-%d", i))})
	}
	l.Close()
	kafkaAddr := freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: "%s"}
http: {listen: ""}
kafka:
  listen: %s
  sasl.enabled.mechanisms: [SCRAM-SHA-256]
  sasl.credentials.file: %s
acls:
  source: file
  file: %s
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freeAddr(t), kafkaAddr, creds, aclFile)), 0o644)
	bucketCreate(t, cfgPath)

	os.Chmod(creds, 0o644)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := serve(ctx, cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "other users can read it") {
		t.Fatalf("a credentials file others can read: %v", err)
	}
	os.Chmod(creds, 0o600)
	startServe(t, cfgPath)

	read := func(pw string) (int, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(0),
			kgo.SASL(scram.Auth{User: "alice", Pass: pw}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			return 0, kerr.ErrorForCode(c)
		}
		return int(resp.Topics[0].Partitions[0].Offset), nil
	}
	testtools.WaitFor(t, "the listener", func() bool { n, err := read("first-pw-of-alice"); return err == nil && n == 5 })
	if _, err := read("not-alices-pw"); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("a wrong password: %v", err)
	}
	os.WriteFile(creds, []byte(credLine("second-pw-of-alice")), 0o600)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"config", "reload", "--config", cfgPath}, &out, &errOut); code != 0 {
		t.Fatalf("config reload: %d %s%s", code, out.String(), errOut.String())
	}
	if n, err := read("second-pw-of-alice"); err != nil || n != 5 {
		t.Errorf("the new password after the reload: %d %v", n, err)
	}
	if _, err := read("first-pw-of-alice"); err == nil {
		t.Error("the old password after the reload")
	}
	// An ACL file that does not load fails the reload, naming its line;
	// the ACLs read before keep deciding.
	os.WriteFile(aclFile, []byte("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"+
		"\t(principal=User:alice, host=*, operation=REED, permissionType=ALLOW)\n"), 0o600)
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"config", "reload", "--config", cfgPath}, &out, &errOut); code != 1 ||
		!strings.Contains(out.String()+errOut.String(), `"REED" is not an operation`) {
		t.Errorf("config reload over a bad ACL file: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if n, err := read("second-pw-of-alice"); err != nil || n != 5 {
		t.Errorf("alice after the refused ACL file: %d %v", n, err)
	}
}
