package listener

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// staticAuthz decides with a fixed ACL set and Kafka's default
// (allow.everyone.if.no.acl.found false).
type staticAuthz struct{ set *kafkaacl.Set }

func (a staticAuthz) Authorize(r kafkaacl.Request) kafkaacl.Decision {
	return kafkaacl.Authorizer{}.Authorize(a.set, r)
}

func anonACL(topic string, pt kafkaacl.PatternType, op kafkaacl.Operation, perm kafkaacl.Permission) kafkaacl.ACL {
	return kafkaacl.ACL{ResourceType: kafkaacl.ResourceTopic, ResourceName: topic, PatternType: pt,
		Principal: Anonymous, Host: "127.0.0.1", Operation: op, Permission: perm}
}

// authzLog holds "orders", "orders-eu", "secret", "__consumer_offsets" and
// KRaft's "__cluster_metadata", one record each.
func authzLog(t testing.TB) *fakeLog {
	l := newFakeLog()
	for _, name := range []string{"orders", "orders-eu", "secret", "__consumer_offsets", clusterMetadataTopic} {
		l.appendRaw(t, name, 0, v2(t, batch.NewParams(0, 0), rec("k", "v-"+name, 1)))
	}
	return l
}

func metadataTopics(t *testing.T, cl *kgo.Client, names ...string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	if names != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, n := range names {
			req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
		}
	}
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		out[*rt.Topic] = rt
	}
	return out
}

func keys(m map[string]kmsg.MetadataResponseTopic) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestAuthorization: with an Authorizer, Metadata lists only the topics
// the client may describe and answers TOPIC_AUTHORIZATION_FAILED for one
// named that it may not (existing or not); Fetch needs READ and
// ListOffsets and OffsetForLeaderEpoch DESCRIBE; a prefixed DENY beats a
// literal ALLOW; __cluster_metadata is never served, not even to a
// client every ACL allows; the authorized operations follow the ACLs.
func TestAuthorization(t *testing.T) {
	L, P := kafkaacl.PatternLiteral, kafkaacl.PatternPrefixed
	set, err := kafkaacl.NewSet([]kafkaacl.ACL{
		anonACL("orders", L, kafkaacl.OpRead, kafkaacl.Allow),
		anonACL("orders-eu", L, kafkaacl.OpRead, kafkaacl.Allow),
		anonACL("orders-", P, kafkaacl.OpRead, kafkaacl.Deny), // beats the literal ALLOW above
		anonACL("secret", L, kafkaacl.OpDescribe, kafkaacl.Allow),
		anonACL("*", L, kafkaacl.OpDescribe, kafkaacl.Allow), // ... which gives __cluster_metadata DESCRIBE too
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, authzLog(t), nil, WithAuthorizer(staticAuthz{set}))
	cl := newKgo(t, ts.addr)

	all := metadataTopics(t, cl)
	if got, want := strings.Join(keys(all), ","), "__consumer_offsets,orders,orders-eu,secret"; got != want {
		t.Fatalf("all topics: %s, want %s (__cluster_metadata never)", got, want)
	}
	ops := func(rt kmsg.MetadataResponseTopic) int32 { return rt.AuthorizedOperations }
	if o := ops(all["orders"]); o != 1<<3|1<<8 {
		t.Errorf("orders' authorized operations %b, want READ and DESCRIBE", o)
	}
	if o := ops(all["secret"]); o != 1<<8 {
		t.Errorf("secret's authorized operations %b, want DESCRIBE only", o)
	}

	// Without the wildcard DESCRIBE, secret stays visible (its own ACL) and
	// the rest of what no ACL allows is hidden, existing or not.
	set2, _ := kafkaacl.NewSet([]kafkaacl.ACL{anonACL("orders", L, kafkaacl.OpRead, kafkaacl.Allow), anonACL("secret", L, kafkaacl.OpDescribe, kafkaacl.Allow)})
	ts2 := startServer(t, authzLog(t), nil, WithAuthorizer(staticAuthz{set2}))
	cl2 := newKgo(t, ts2.addr)
	if got := strings.Join(keys(metadataTopics(t, cl2)), ","); got != "orders,secret" {
		t.Fatalf("all topics: %s, want orders,secret", got)
	}
	named := metadataTopics(t, cl2, "orders-eu", "no-such-topic", "orders", clusterMetadataTopic)
	for name, want := range map[string]int16{"orders-eu": kerr.TopicAuthorizationFailed.Code, "no-such-topic": kerr.TopicAuthorizationFailed.Code,
		"orders": 0, clusterMetadataTopic: kerr.UnknownTopicOrPartition.Code} {
		if got := named[name].ErrorCode; got != want {
			t.Errorf("Metadata naming %s: %v, want %v", name, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
		if want != 0 && len(named[name].Partitions) != 0 {
			t.Errorf("Metadata naming %s: partitions given with the error", name)
		}
	}

	// Fetch: READ. secret (DESCRIBE only), orders-eu (denied by prefix),
	// __cluster_metadata (never) give their codes; orders reads.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes, fetch.ReplicaID = 12, 1<<20, -1
	for _, name := range []string{"orders", "orders-eu", "secret", clusterMetadataTopic} {
		fetch.Topics = append(fetch.Topics, kmsg.FetchRequestTopic{Topic: name, Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}})
	}
	fr := dialRaw(t, ts.addr, "authz").roundTrip(fetch).(*kmsg.FetchResponse)
	want := map[string]int16{"orders": 0, "orders-eu": kerr.TopicAuthorizationFailed.Code, "secret": kerr.TopicAuthorizationFailed.Code,
		clusterMetadataTopic: kerr.UnknownTopicOrPartition.Code}
	for _, rt := range fr.Topics {
		p := rt.Partitions[0]
		if p.ErrorCode != want[rt.Topic] {
			t.Errorf("Fetch %s: %v, want %v", rt.Topic, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want[rt.Topic]))
		}
		if (p.ErrorCode == 0) != (len(p.RecordBatches) > 0) {
			t.Errorf("Fetch %s: error %d with %d bytes of records", rt.Topic, p.ErrorCode, len(p.RecordBatches))
		}
	}

	// ListOffsets and OffsetForLeaderEpoch: DESCRIBE (secret may, the
	// hidden ones may not).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	for _, name := range []string{"secret", "orders-eu", clusterMetadataTopic} {
		lo.Topics = append(lo.Topics, kmsg.ListOffsetsRequestTopic{Topic: name, Partitions: []kmsg.ListOffsetsRequestTopicPartition{
			{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}})
	}
	lo.Version = 7
	lr := dialRaw(t, ts2.addr, "authz").roundTrip(lo).(*kmsg.ListOffsetsResponse)
	wantLO := map[string]int16{"secret": 0, "orders-eu": kerr.TopicAuthorizationFailed.Code, clusterMetadataTopic: kerr.UnknownTopicOrPartition.Code}
	for _, rt := range lr.Topics {
		if got := rt.Partitions[0].ErrorCode; got != wantLO[rt.Topic] {
			t.Errorf("ListOffsets %s: %v, want %v", rt.Topic, kerr.ErrorForCode(got), kerr.ErrorForCode(wantLO[rt.Topic]))
		}
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	for _, name := range []string{"secret", "orders-eu"} {
		oe.Topics = append(oe.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: name, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{
			{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}})
	}
	oe.Version = 4
	or := dialRaw(t, ts2.addr, "authz").roundTrip(oe).(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range or.Topics {
		wantCode := int16(0)
		if rt.Topic == "orders-eu" {
			wantCode = kerr.TopicAuthorizationFailed.Code
		}
		if got := rt.Partitions[0].ErrorCode; got != wantCode {
			t.Errorf("OffsetForLeaderEpoch %s: %v, want %v", rt.Topic, kerr.ErrorForCode(got), kerr.ErrorForCode(wantCode))
		}
	}
	if !strings.Contains(ts2.logs.String(), "Kafka request denied") || !strings.Contains(ts2.logs.String(), "principal=User:ANONYMOUS") {
		t.Errorf("no denial logged with its principal:\n%s", ts2.logs.String())
	}
}

// TestNoAuthorizerStillHidesClusterMetadata: without an Authorizer every
// topic is served as before, but __cluster_metadata still is not.
func TestNoAuthorizerStillHidesClusterMetadata(t *testing.T) {
	ts := startServer(t, authzLog(t), nil)
	cl := newKgo(t, ts.addr)
	if got := strings.Join(keys(metadataTopics(t, cl)), ","); got != "__consumer_offsets,orders,orders-eu,secret" {
		t.Fatalf("all topics: %s", got)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes, fetch.ReplicaID = 12, 1<<20, -1
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: clusterMetadataTopic, Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	fr := dialRaw(t, ts.addr, "authz").roundTrip(fetch).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("Fetch of __cluster_metadata: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
	fetch.Version = 13 // by topic id: its id is not known
	fetch.Topics[0].TopicID = topicID(clusterMetadataTopic)
	fr = dialRaw(t, ts.addr, "authz").roundTrip(fetch).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("Fetch v13 of __cluster_metadata's id: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
}
