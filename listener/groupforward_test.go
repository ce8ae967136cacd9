package listener

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// kgoForwarder relays group requests through a franz-go client capped at
// the versions the listener serves, as cluster.Client's ForwardGroup
// does.
type kgoForwarder struct{ cl *kgo.Client }

func newForwarder(t *testing.T, addr string) kgoForwarder {
	v := kversion.Tip()
	for _, a := range groupServed {
		v.SetMaxKeyVersion(a.key, a.max)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kgoForwarder{cl}
}

func (f kgoForwarder) ForwardGroup(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return f.cl.Request(ctx, req)
}

// forwardingServer is a listener over "orders" (parts partitions of n
// records) whose groups are the cluster's at addr.
func forwardingServer(t *testing.T, clusterAddr string, parts int32, n int, opts ...Option) *testServer {
	t.Helper()
	l := newFakeLog()
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			l.appendRaw(t, "orders", p, v2(t, batch.NewParams(int64(i), 0), rec(fmt.Sprintf("k%d", i), fmt.Sprintf("p%d-v%d", p, i), 1000+int64(i))))
		}
	}
	return startServer(t, l, nil, append([]Option{WithGroupForwarding(newForwarder(t, clusterAddr))}, opts...)...)
}

// TestGroupAcrossTwoTierds: two tierds serving the same partitions relay
// the group protocol to one Kafka cluster (kfake), so a group with a
// member on each is one group: the partitions are spread between them,
// each record is read once, and the commits are the cluster's.
func TestGroupAcrossTwoTierds(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	a := forwardingServer(t, kc.ListenAddrs()[0], 4, 25)
	b := forwardingServer(t, kc.ListenAddrs()[0], 4, 25)

	var mu sync.Mutex
	read := map[string]string{} // partition/offset -> the tierd it came through
	twice := 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster := kadm.NewClient(newPlainClient(t, kc.ListenAddrs()[0]))
	var consumers []*kgo.Client
	names := map[*kgo.Client]string{}
	for name, ts := range map[string]*testServer{"a": a, "b": b} {
		cl := groupConsumer(t, ts.addr, "spread", kgo.Balancers(kgo.RangeBalancer()))
		consumers, names[cl] = append(consumers, cl), name
	}
	// Both in the group before anything is read: a rebalance moving
	// partitions not yet committed would read them again (at least once).
	waitFor(t, "one group of two members in the cluster", func() bool {
		d, err := cluster.DescribeGroups(ctx, "spread")
		return err == nil && d["spread"].State == "Stable" && len(d["spread"].Members) == 2
	})
	for _, cl := range consumers {
		name := names[cl]
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
					if _, ok := read[k]; ok {
						twice++
					}
					read[k] = name
					mu.Unlock()
				})
			}
		}()
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Log("last seen: " + last)
		}
	}()
	waitFor(t, "one group of two members in the cluster, every record read, every offset committed", func() bool {
		d, err := cluster.DescribeGroups(ctx, "spread")
		mu.Lock()
		n := len(read)
		mu.Unlock()
		last = fmt.Sprintf("group %+v %v; %d records read", d["spread"], err, n)
		if err != nil || d["spread"].State != "Stable" || len(d["spread"].Members) != 2 {
			return false
		}
		if n != 100 {
			return false
		}
		for _, cl := range consumers {
			cl.CommitUncommittedOffsets(ctx)
		}
		offs, err := cluster.FetchOffsets(ctx, "spread")
		if err != nil {
			return false
		}
		for p := int32(0); p < 4; p++ {
			if o, ok := offs.Lookup("orders", p); !ok || o.At != 25 {
				return false
			}
		}
		return true
	})
	for _, cl := range consumers {
		cl.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	through := map[string]int{}
	for _, name := range read {
		through[name]++
	}
	if twice != 0 || through["a"] == 0 || through["b"] == 0 {
		t.Fatalf("records read through each tierd %v, %d read twice: want one group spread over both", through, twice)
	}
}

// TestForwardedGroupChecks: with groups relayed, the client's GROUP and
// TOPIC ACLs are still checked by tierd first: a denied request never
// reaches the cluster; old request versions are translated (a v2
// LeaveGroup, a v7 OffsetFetch, a v3 JoinGroup without member id); and a
// cluster that cannot be reached answers COORDINATOR_NOT_AVAILABLE.
func TestForwardedGroupChecks(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.SeedTopics(1, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	set, err := kafkaacl.NewSet([]kafkaacl.ACL{
		groupACL("app", kafkaacl.OpRead, kafkaacl.Allow),
		anonACL("orders", kafkaacl.PatternLiteral, kafkaacl.OpRead, kafkaacl.Allow),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := forwardingServer(t, kc.ListenAddrs()[0], 1, 3, WithAuthorizer(staticAuthz{set}))
	rc := dialRaw(t, ts.addr, "fwd")
	cluster := kadm.NewClient(newPlainClient(t, kc.ListenAddrs()[0]))
	ctx := context.Background()

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "app", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2, LeaderEpoch: -1}}},
		{Topic: "secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2, LeaderEpoch: -1}}},
	}
	cr := rc.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	if cr.Topics[0].Partitions[0].ErrorCode != 0 || cr.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("commit: %+v", cr.Topics)
	}
	commit.Group = "other"
	if cr := rc.roundTrip(commit).(*kmsg.OffsetCommitResponse); cr.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("commit to a group without READ: %+v", cr.Topics)
	}
	offs, err := cluster.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("orders", 0); o.At != 2 {
		t.Fatalf("the cluster has %+v for app", o)
	}
	if _, ok := offs.Lookup("secret", 0); ok {
		t.Fatal("a denied partition's commit reached the cluster")
	}
	if g, _ := cluster.FetchOffsets(ctx, "other"); len(g.Offsets()) != 0 {
		t.Fatal("a denied group's commit reached the cluster")
	}

	// A v7 OffsetFetch (one group) answers in its own form.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 7, "app"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}, {Topic: "secret", Partitions: []int32{0}}}
	fr := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	if len(fr.Topics) != 2 || fr.Topics[0].Partitions[0].Offset != 2 || fr.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("v7 OffsetFetch: %+v", fr)
	}

	// A v3 JoinGroup without member id joins at once (no KIP-394 round
	// for the client), and a v2 LeaveGroup leaves.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = 3, "app", 10000, 10000, "consumer"
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"orders"}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
	jr := rc.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.MemberID == "" || jr.Generation < 1 {
		t.Fatalf("v3 join: %+v", jr)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 2, "app", jr.MemberID
	if lr := rc.roundTrip(leave).(*kmsg.LeaveGroupResponse); lr.ErrorCode != 0 {
		t.Fatalf("v2 leave: %+v", lr)
	}
	if d, err := cluster.DescribeGroups(ctx, "app"); err != nil || len(d["app"].Members) != 0 {
		t.Fatalf("after the leave the cluster has %+v %v", d["app"], err)
	}

	// The cluster gone: COORDINATOR_NOT_AVAILABLE, the connection kept.
	kc.Close()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "app", "m", 1
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = rctx
	if r := rc.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("heartbeat with the cluster gone: %+v", r)
	}
}
