package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/seglog"
)

// TestKafkaGroupsInCluster: with kafka.bootstrap_servers set
// (kafka.group.coordinator auto), tierd run relays its consumers' group
// to the cluster: a franz-go group consumer reading through tierd is a
// member of the cluster's group, and its commit is the cluster's;
// tierd keeps no group of its own.
func TestKafkaGroupsInCluster(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	root := t.TempDir()
	l, err := seglog.Open(filepath.Join(root, "logs", "orders-0"), seglog.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		l.Append(seglog.Record{Value: []byte(fmt.Sprintf("o-%d", i))})
	}
	l.Close()
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
  listen: %s
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freeAddr(t), kc.ListenAddrs()[0], kafkaAddr)), 0o644)
	bucketCreate(t, cfgPath)
	var log syncBuffer
	startServeLog(t, cfgPath, &log)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumerGroup("through-tierd"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for n := 0; n < 20; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 20: %v\n%s", n, fs.Errors(), log.String())
		}
		n += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	d, err := adm.DescribeGroups(ctx, "through-tierd")
	if err != nil || len(d["through-tierd"].Members) != 1 {
		t.Fatalf("the cluster's group: %+v %v", d["through-tierd"], err)
	}
	offs, err := adm.FetchOffsets(ctx, "through-tierd")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("orders", 0); !ok || o.At != 20 {
		t.Fatalf("the cluster has %+v for the group, want 20", o)
	}
	code, out, errOut := runCmd("status", "--config", cfgPath)
	if code != 0 || strings.Contains(out, "consumer groups:") {
		t.Fatalf("tierd status (%d) shows groups of its own:\n%s\n%s", code, out, errOut)
	}
}
