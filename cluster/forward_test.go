package cluster

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestForwardGroup: group requests reach the cluster's coordinator and
// come back, at most at the versions whose topics are named (OffsetCommit
// and OffsetFetch v8, not v10's topic ids), the commit kept by the
// cluster.
func TestForwardGroup(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "orders"))
	c, err := New(testConfig(kc, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	resp, err := c.ForwardGroup(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	cr := resp.(*kmsg.OffsetCommitResponse)
	if cr.Version > 8 || len(cr.Topics) != 1 || cr.Topics[0].Topic != "orders" || cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit answered %+v (v%d)", cr.Topics, cr.Version)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
	resp, err = c.ForwardGroup(ctx, fetch)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.OffsetFetchResponse)
	if fr.Version > 8 || len(fr.Groups) != 1 || fr.Groups[0].Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("fetch answered %+v (v%d)", fr.Groups, fr.Version)
	}
	kc.Close()
	if _, err := c.ForwardGroup(ctx, commit); err == nil {
		t.Fatal("a commit to a cluster that is gone succeeded")
	}
}
