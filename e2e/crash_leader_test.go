package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/internal/kafkalog"
)

// leaderCrashPoints are the steps where a tierd that owns its partition by
// Kafka leadership (kafka.bootstrap_servers set) kills itself: raising the
// bucket's fence for a new leader epoch, and a copy's steps, with the one
// between its manifest's write and the fence check that commits it.
var leaderCrashPoints = []string{
	"leader.fenced", "copy.started", "copy.uploaded", "copy.manifest-written", "copy.finished",
	"local.offset-saved", "local.renamed",
}

// TestCrashLeader is TestCrash for a tierd whose ownership is Kafka's
// leadership, from an in-process Kafka cluster (kfake, 3 brokers; tierd is
// broker 1). Before every start the partition's leadership moves to
// broker 2 and back, so that the start finds a new leader epoch and
// raises the bucket's fence before copying. Each named step is aimed at in
// turn; the run fails naming a step never reached. The number of kills is
// a third of TIERD_CRASH_ROUNDS (default 25), at least 10.
func TestCrashLeader(t *testing.T) {
	rounds := 25
	if v := os.Getenv("TIERD_CRASH_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	rounds = max(rounds/3, 10)
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("tierd-crash-leader"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := context.Background()
	created, err := adm.CreateTopic(ctx, 1, 3, nil, "lead")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	lead := func(broker int32) {
		t.Helper()
		if err := kc.MoveTopicPartition("lead", 0, broker); err != nil {
			t.Fatal(err)
		}
	}
	lead(1)
	r := newCrashRig(t, "lead", fmt.Sprintf("kafka: {bootstrap_servers: [%s], request_timeout: 2s}\n", kc.ListenAddrs()[0]))
	pm := filepath.Join(r.root, "logs", "lead-0", kafkalog.PartitionMetadataFile)
	if err := os.WriteFile(pm, []byte("version: 0\ntopic_id: "+cluster.FormatTopicID(created.ID)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, uint64(rounds)))
	var tally crashTally
	hits := crashHits{}
	for round := 0; round < rounds; round++ {
		n := 20 + rng.IntN(20)
		if round%5 == 4 {
			n = 1300 // ~6.5 MB: two parts
		}
		r.appendSegment(n)
		lead(2)
		lead(1)
		// The first rounds aim at each step's first hit; then one kill in
		// four is at a random moment and the rest at a step, in turn, at
		// its first or second hit.
		point := ""
		if round < len(leaderCrashPoints) || rng.IntN(4) != 0 {
			nth := 1
			if round >= len(leaderCrashPoints) {
				nth += rng.IntN(2)
			}
			point = fmt.Sprintf("%s:%d", leaderCrashPoints[round%len(leaderCrashPoints)], nth)
		}
		r.start(point)
		if point == "" {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			r.kill()
		} else if r.exitedOrIdle(30*time.Second, nil) {
			hits.add(point)
		} else {
			r.kill()
		}
		tally.kills++
		r.start("")
		resp, err := r.synced(time.Now().Add(60*time.Second), nil)
		if err != nil {
			r.failRound(round, point, err)
		}
		r.check(resp, &tally)
		r.stop(round)
		r.failedRound(round, point)
	}
	fmt.Printf("leader crash test: %d kills, %d lost offsets, %d orphan objects, %d unsafe local deletes\n", tally.kills, tally.lost, tally.orphans, tally.unsafe)
	t.Logf("kills at named steps, at their first+second hit: %s (the rest at random moments)", hits.format(leaderCrashPoints))
	if missed := hits.unreached(leaderCrashPoints); len(missed) > 0 {
		t.Errorf("%d of %d crash points were never reached: %s", len(missed), len(leaderCrashPoints), strings.Join(missed, ", "))
	}
	if tally.corrupt > 0 {
		t.Errorf("%d finished objects missing or corrupt", tally.corrupt)
	}
	if r.log.LocalLogStartOffset() == 0 {
		t.Error("local retention never ran")
	}
}
