package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

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
	waitFor(t, "orders' records through tierd's listener", func() bool {
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
	waitFor(t, "the revoke applied by tierd", func() bool { return describe("orders") == kerr.TopicAuthorizationFailed.Code })
}
