package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeSeesTopic(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	id := createTopic(t, adm, "orders", 3)
	cl := newClient(t, testConfig(c, nil))

	v, err := cl.Describe(t.Context(), nil)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if v.ClusterID != testClusterID {
		t.Errorf("ClusterID %q, want %q (set by kfake.ClusterID)", v.ClusterID, testClusterID)
	}
	if !slices.Equal(v.Brokers, []int32{0, 1, 2}) {
		t.Errorf("Brokers %v, want [0 1 2]", v.Brokers)
	}
	if !slices.Contains(v.Brokers, v.ControllerID) {
		t.Errorf("ControllerID %d not among the brokers %v", v.ControllerID, v.Brokers)
	}
	if !strings.HasPrefix(v.Source, "broker ") || v.At.IsZero() {
		t.Errorf("Source %q At %v: want the answering broker and a time", v.Source, v.At)
	}
	topic, ok := v.Topics["orders"]
	if !ok {
		t.Fatalf("topic orders missing from %v", v.Topics)
	}
	if len(id) != TopicIDLen || topic.ID != id || v.ByID[id] != "orders" {
		t.Errorf("topic id %q, ByID[%q]=%q; CreateTopics answered %q", topic.ID, id, v.ByID[id], id)
	}
	if topic.Internal || topic.Err != nil || topic.Configs != nil {
		t.Errorf("topic %+v: want not internal, no error, no configs (none asked)", topic)
	}
	if len(topic.Partitions) != 3 {
		t.Fatalf("%d partitions, want 3", len(topic.Partitions))
	}
	for p, part := range topic.Partitions {
		if want := c.LeaderFor("orders", p); part.Leader != want {
			t.Errorf("partition %d leader %d, kfake says %d", p, part.Leader, want)
		}
		if part.LeaderEpoch < 0 || part.Err != nil {
			t.Errorf("partition %d: epoch %d err %v", p, part.LeaderEpoch, part.Err)
		}
		if len(part.Replicas) != 3 || !slices.Contains(part.Replicas, part.Leader) || len(part.ISR) != 3 {
			t.Errorf("partition %d replicas %v isr %v: want 3 of each, leader among them", p, part.Replicas, part.ISR)
		}
	}
}

func TestDescribeSeesLeaderMove(t *testing.T) {
	c := newCluster(t)
	createTopic(t, newAdmin(t, c), "orders", 2)
	cl := newClient(t, testConfig(c, nil))

	before, err := cl.Describe(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	old := before.Topics["orders"].Partitions[1]
	to := (old.Leader + 1) % 3
	if err := c.MoveTopicPartition("orders", 1, to); err != nil {
		t.Fatal(err)
	}
	after, err := cl.Describe(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := after.Topics["orders"].Partitions[1]
	if moved.Leader != to || moved.LeaderEpoch != old.LeaderEpoch+1 {
		t.Errorf("after the move: leader %d epoch %d, want leader %d epoch %d", moved.Leader, moved.LeaderEpoch, to, old.LeaderEpoch+1)
	}
	if was, now := before.Topics["orders"].Partitions[0], after.Topics["orders"].Partitions[0]; was.LeaderEpoch != now.LeaderEpoch || was.Leader != now.Leader {
		t.Errorf("partition 0 changed without a move: %+v -> %+v", was, now)
	}
}

func TestDescribeConfigsFollowAlter(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	createTopic(t, adm, "orders", 1)
	createTopic(t, adm, "other", 1)
	cl := newClient(t, testConfig(c, nil))

	v, err := cl.Describe(t.Context(), []string{"orders", "missing-topic"})
	if err != nil {
		t.Fatal(err)
	}
	got := v.Topics["orders"].Configs
	if rm := got["retention.ms"]; rm.Value != "604800000" || rm.Source != "DEFAULT_CONFIG" || !rm.IsDefault || rm.FromTopic() {
		t.Errorf("retention.ms before alter: %+v, want 604800000 from DEFAULT_CONFIG", rm)
	}
	if cp := got["cleanup.policy"]; cp.Value != "delete" {
		t.Errorf("cleanup.policy %+v, want delete", cp)
	}
	for k := range got {
		if !slices.Contains(TopicConfigKeys, k) {
			t.Errorf("config %s returned but not asked for", k)
		}
	}
	if v.Topics["other"].Configs != nil || v.Topics["other"].ConfigErr != nil {
		t.Errorf("configs of a topic not asked for: %+v", v.Topics["other"])
	}
	if _, ok := v.Topics["missing-topic"]; ok {
		t.Error("a topic the cluster does not list appeared in the view")
	}

	// IncrementalAlterConfigs, as kafka-configs --alter does today.
	rs, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")}}, "orders")
	if err == nil {
		_, err = rs.On("orders", nil)
	}
	if err != nil || rs[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %v", err, rs)
	}
	// AlterConfigs (the older, whole-state request) on retention.bytes.
	rs, err = adm.AlterTopicConfigsState(t.Context(), []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("3600000")}, {Name: "retention.bytes", Value: kadm.StringPtr("1048576")}}, "orders")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %v", err, rs)
	}

	v, err = cl.Describe(t.Context(), []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	got = v.Topics["orders"].Configs
	if rm := got["retention.ms"]; rm.Value != "3600000" || rm.Source != "DYNAMIC_TOPIC_CONFIG" || rm.IsDefault || !rm.FromTopic() {
		t.Errorf("retention.ms after alter: %+v, want 3600000 from DYNAMIC_TOPIC_CONFIG", rm)
	}
	if rb := got["retention.bytes"]; rb.Value != "1048576" || rb.Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.bytes after alter: %+v", rb)
	}
}

// kfake does not know the KIP-405 topic configs; a broker that does
// returns them, and they must come through.
func TestDescribeConfigsPassThroughTieredKeys(t *testing.T) {
	c := newCluster(t)
	createTopic(t, newAdmin(t, c), "orders", 1)
	cl := newClient(t, testConfig(c, nil))
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			if !slices.Contains(rr.ConfigNames, "local.retention.ms") {
				t.Errorf("DescribeConfigs asked for %v, want the tiered keys", rr.ConfigNames)
			}
			r := kmsg.NewDescribeConfigsResponseResource()
			r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
			add := func(k, v string, src kmsg.ConfigSource, sensitive bool) {
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value, rc.Source, rc.IsSensitive = k, kmsg.StringPtr(v), src, sensitive
				// The v0-only flag, set here as kfake sets it for
				// static broker configs; from v1 the source decides.
				rc.IsDefault = src == kmsg.ConfigSourceStaticBrokerConfig
				r.Configs = append(r.Configs, rc)
			}
			add("local.retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig, false)
			add("local.retention.bytes", "-2", kmsg.ConfigSourceDefaultConfig, false)
			add("remote.storage.enable", "true", kmsg.ConfigSourceStaticBrokerConfig, false)
			add("retention.bytes", "hidden", kmsg.ConfigSourceDynamicBrokerConfig, true)
			add("max.message.bytes", "1024", kmsg.ConfigSourceDynamicTopicConfig, false) // not asked
			resp.Resources = append(resp.Resources, r)
		}
		return resp, nil, true
	})
	v, err := cl.Describe(t.Context(), []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ConfigValue{
		"local.retention.ms":    {Value: "3600000", Source: "DYNAMIC_TOPIC_CONFIG"},
		"local.retention.bytes": {Value: "-2", Source: "DEFAULT_CONFIG", IsDefault: true},
		"remote.storage.enable": {Value: "true", Source: "STATIC_BROKER_CONFIG"},
		"retention.bytes":       {Source: "DYNAMIC_BROKER_CONFIG", Sensitive: true},
	}
	got := v.Topics["orders"].Configs
	if len(got) != len(want) {
		t.Errorf("configs %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
}

func TestDescribeConfigsErrorIsPerTopic(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	createTopic(t, adm, "orders", 1)
	createTopic(t, adm, "secret", 1)
	cl := newClient(t, testConfig(c, nil))
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: "secret", Err: kerr.TopicAuthorizationFailed, Count: -1})

	v, err := cl.Describe(t.Context(), []string{"orders", "secret"})
	if err != nil {
		t.Fatal(err)
	}
	s := v.Topics["secret"]
	if s.Configs != nil || !errors.Is(s.ConfigErr, kerr.TopicAuthorizationFailed) || !strings.Contains(s.ConfigErr.Error(), "secret") || !strings.Contains(s.ConfigErr.Error(), "DescribeConfigs v4 to broker ") {
		t.Errorf("secret: configs %v err %v, want no configs and TOPIC_AUTHORIZATION_FAILED naming the topic", s.Configs, s.ConfigErr)
	}
	if o := v.Topics["orders"]; o.ConfigErr != nil || o.Configs["retention.ms"].Value == "" {
		t.Errorf("orders: configs %v err %v, want its configs despite the other topic's error", o.Configs, o.ConfigErr)
	}
	if len(s.Partitions) != 1 {
		t.Errorf("secret's partitions %v: a config error must not hide the metadata", s.Partitions)
	}
}

func TestDescribeWrongCluster(t *testing.T) {
	c := newCluster(t)
	cl := newClient(t, testConfig(c, func(cfg *Config) { cfg.ClusterID = "another-cluster" }))
	_, err := cl.Describe(t.Context(), nil)
	if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), testClusterID) {
		t.Fatalf("Describe against %s configured for another-cluster: %v, want ErrClusterMismatch naming both", testClusterID, err)
	}
}
