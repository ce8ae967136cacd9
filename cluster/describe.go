package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// View is one read of the cluster: one Metadata request for all topics
// (with their topic ids, Metadata v10 or later) answered by one broker,
// plus one DescribeConfigs request for the topics asked for.
//
// A topic missing from Topics is not proof that it is gone: a broker
// leaves out of an all-topics listing every topic the client's principal
// may not DESCRIBE. Use TopicIDs for that question.
type View struct {
	// ClusterID is the cluster id the broker answered with ("" when it
	// sent none, before Metadata v2).
	ClusterID string
	// ControllerID is the controller's node id (KRaft brokers answer a
	// random live broker, as Kafka does), or -1.
	ControllerID int32
	// Brokers are the node ids of the live brokers, ascending.
	Brokers []int32
	// Topics are the topics the principal may describe, by name.
	Topics map[string]Topic
	// ByID maps a topic id, in FormatTopicID's form, to the topic's name.
	// Topics without an id (brokers before 2.8) are not in it.
	ByID map[string]string
	// Source is the broker that answered the Metadata request, as
	// "broker 1 (host:port)".
	Source string
	// At is when the Metadata answer arrived.
	At time.Time
}

// Topic is one topic of a View.
type Topic struct {
	Name string
	// ID is the topic id in FormatTopicID's form; "" when the broker
	// sent none.
	ID       string
	Internal bool
	// Err is the topic-level error of the listing, e.g.
	// LEADER_NOT_AVAILABLE while the topic is being created; nil when
	// none.
	Err error
	// Partitions by partition number.
	Partitions map[int32]Partition
	// Configs holds the keys of TopicConfigKeys the broker returned, for
	// topics passed to Describe; nil when DescribeConfigs failed for the
	// topic (ConfigErr says why) or was not asked for. A key the broker
	// does not know (local.retention.ms before Kafka 3.6) is absent.
	Configs map[string]ConfigValue
	// ConfigErr is why DescribeConfigs failed for this topic.
	ConfigErr error
}

// Partition is one partition of a Topic.
type Partition struct {
	// Leader is the leader's node id, -1 when there is none.
	Leader int32
	// LeaderEpoch is the partition's leader epoch (Metadata v7 or later;
	// -1 before).
	LeaderEpoch int32
	// Replicas and ISR are node ids, in the broker's order.
	Replicas, ISR []int32
	// Err is the partition-level error, e.g. LEADER_NOT_AVAILABLE; nil
	// when none.
	Err error
}

// ConfigValue is one topic config as DescribeConfigs returns it.
type ConfigValue struct {
	// Value is the config's value; "" for a null or sensitive value.
	Value string
	// Source is where the value comes from, with Kafka's names:
	// DYNAMIC_TOPIC_CONFIG (kafka-configs --alter on the topic),
	// DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
	// STATIC_BROKER_CONFIG (server.properties) or DEFAULT_CONFIG.
	Source string
	// IsDefault is true when Source is DEFAULT_CONFIG, as Kafka's
	// Admin client ConfigEntry.isDefault decides it.
	IsDefault bool
	// Sensitive is true when the broker withheld the value.
	Sensitive bool
}

// FromTopic reports whether the value was set on the topic itself
// (DYNAMIC_TOPIC_CONFIG), as kafka-configs --alter --entity-type topics
// sets it.
func (v ConfigValue) FromTopic() bool {
	return v.Source == kmsg.ConfigSourceDynamicTopicConfig.String()
}

// Describe reads the cluster: one Metadata request for all topics, then
// one DescribeConfigs request for the keys in TopicConfigKeys of those
// configTopics the listing holds. Each request is bounded by
// RequestTimeout. It fails when the Metadata request fails (the error
// names the request and broker) or the cluster id differs from
// Config.ClusterID (ErrClusterMismatch); a failed DescribeConfigs only
// sets ConfigErr on the topics concerned.
func (c *Client) Describe(ctx context.Context, configTopics []string) (*View, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics
	req.AllowAutoTopicCreation = false
	kresp, meta, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	src := source(meta, resp.Brokers)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("cluster: Metadata v%d to %s: %w", resp.GetVersion(), src, err)
	}
	if err := c.checkClusterID(resp.ClusterID, src); err != nil {
		return nil, err
	}
	v := &View{ControllerID: resp.ControllerID, Topics: map[string]Topic{}, ByID: map[string]string{}, Source: src, At: time.Now()}
	if resp.ClusterID != nil {
		v.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		v.Brokers = append(v.Brokers, b.NodeID)
	}
	slices.Sort(v.Brokers)
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic == "" {
			continue
		}
		t := Topic{Name: *rt.Topic, ID: FormatTopicID(rt.TopicID), Internal: rt.IsInternal,
			Err: kerr.ErrorForCode(rt.ErrorCode), Partitions: map[int32]Partition{}}
		for _, p := range rt.Partitions {
			t.Partitions[p.Partition] = Partition{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		v.Topics[t.Name] = t
		if t.ID != "" {
			v.ByID[t.ID] = t.Name
		}
	}
	c.describeConfigs(ctx, v, configTopics, resp.Brokers)
	return v, nil
}

// describeConfigs fills Configs or ConfigErr of the listed configTopics.
func (c *Client) describeConfigs(ctx context.Context, v *View, configTopics []string, brokers []kmsg.MetadataResponseBroker) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	asked := map[string]bool{}
	for _, name := range configTopics {
		if _, ok := v.Topics[name]; !ok || asked[name] {
			continue
		}
		asked[name] = true
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = name
		r.ConfigNames = slices.Clone(TopicConfigKeys)
		req.Resources = append(req.Resources, r)
	}
	if len(req.Resources) == 0 {
		return
	}
	setErr := func(name string, err error) {
		t := v.Topics[name]
		t.Configs, t.ConfigErr = nil, err
		v.Topics[name] = t
	}
	kresp, meta, err := c.request(ctx, req)
	if err != nil {
		for name := range asked {
			setErr(name, err)
		}
		return
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	what := fmt.Sprintf("DescribeConfigs v%d to %s", resp.GetVersion(), source(meta, brokers))
	for _, r := range resp.Resources {
		if r.ResourceType != kmsg.ConfigResourceTypeTopic || !asked[r.ResourceName] {
			continue
		}
		delete(asked, r.ResourceName)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil && *r.ErrorMessage != "" {
				msg = ": " + *r.ErrorMessage
			}
			setErr(r.ResourceName, fmt.Errorf("cluster: %s for topic %s: %w%s", what, r.ResourceName, err, msg))
			continue
		}
		t := v.Topics[r.ResourceName]
		t.Configs, t.ConfigErr = map[string]ConfigValue{}, nil
		for _, rc := range r.Configs {
			if !slices.Contains(TopicConfigKeys, rc.Name) {
				continue
			}
			cv := ConfigValue{Source: rc.Source.String(), Sensitive: rc.IsSensitive}
			if rc.Value != nil && !rc.IsSensitive {
				cv.Value = *rc.Value
			}
			cv.IsDefault = rc.Source == kmsg.ConfigSourceDefaultConfig || (resp.GetVersion() == 0 && rc.IsDefault)
			t.Configs[rc.Name] = cv
		}
		v.Topics[r.ResourceName] = t
	}
	for name := range asked {
		setErr(name, fmt.Errorf("cluster: %s: topic %s missing from the answer", what, name))
	}
}
