package listener

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/listener/groups/groupstest"
)

// TestMoveGroupOffsetsFromCluster is docs/reads.md's recipe: a group's
// committed offsets, read from a Kafka cluster (kfake) with kadm and
// committed to tierd with kadm while the group has no members, are where
// the group's consumers on tierd start; the cluster's group is not
// touched, and tierd's commits do not reach it.
func TestMoveGroupOffsetsFromCluster(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := kadm.NewClient(newPlainClient(t, kc.ListenAddrs()[0]))
	at := kadm.Offsets{}
	for p, o := range []int64{5, 12, 0} {
		at.Add(kadm.Offset{Topic: "orders", Partition: int32(p), At: o, LeaderEpoch: -1})
	}
	if _, err := cluster.CommitOffsets(ctx, "billing", at); err != nil {
		t.Fatal(err)
	}

	ts, _ := groupServer(t, 3, 20, groupstest.NewMemStore())
	tierd := kadm.NewClient(newPlainClient(t, ts.addr))
	fetched, err := cluster.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tierd.CommitOffsets(ctx, "billing", fetched.Offsets())
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit to tierd: %v %v", err, resp.Error())
	}

	cl := groupConsumer(t, ts.addr, "billing")
	first := map[int32]int64{}
	for len(first) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("first offsets read: %v (%v)", first, fs.Errors())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	for p, want := range map[int32]int64{0: 5, 1: 12, 2: 0} {
		if first[p] != want {
			t.Errorf("orders-%d: the group on tierd started at %d, want the cluster's commit %d", p, first[p], want)
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	back, err := cluster.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := back.Lookup("orders", 0); o.At != 5 {
		t.Errorf("the cluster's group moved to %d: tierd's groups are its own", o.At)
	}
}
