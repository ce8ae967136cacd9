package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCrashGroupCommits: tierd run is killed with SIGKILL at random
// moments while a client commits offsets to a group as fast as tierd
// answers; after every restart the group's committed offset is at least
// the last commit tierd acknowledged (a commit is durable before its
// answer) and at most the last one sent (nothing made up). A process
// crash: the store syncs each commit for a machine's (rlmm).
func TestCrashGroupCommits(t *testing.T) {
	t.Parallel()
	bin, cfg, kafkaAddr, _ := groupsTierd(t, 1, 1)
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	commit := func(cl *kgo.Client, off int64) error {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Group, q.Generation = "crash", -1
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}}}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		resp, err := q.RequestWith(rctx, cl)
		if err != nil {
			return err
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			return fmt.Errorf("commit answered code %d", code)
		}
		return nil
	}
	fetch := func(cl *kgo.Client) (int64, error) {
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Group = "crash"
		q.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		resp, err := q.RequestWith(rctx, cl)
		if err != nil {
			return 0, err
		}
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			return 0, fmt.Errorf("offset fetch answered %d/%d", resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode)
		}
		return resp.Topics[0].Partitions[0].Offset, nil
	}
	const kills = 8
	acked, sent := int64(-1), int64(-1)
	for round := 0; round <= kills; round++ {
		cmd := exec.Command(bin, "run", "--config", cfg)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for got, err = fetch(cl); err != nil; got, err = fetch(cl) { // tierd starting
			if ctx.Err() != nil {
				t.Fatalf("round %d: %v\n%s", round, err, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got < acked || got > sent {
			t.Fatalf("round %d: committed offset %d after the restart; acknowledged %d, sent %d", round, got, acked, sent)
		}
		if round == kills {
			cl.Close()
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			break
		}
		killAt := time.Now().Add(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		go func() { time.Sleep(time.Until(killAt)); cmd.Process.Signal(syscall.SIGKILL) }()
		for time.Now().Before(killAt.Add(time.Second)) {
			sent++
			if err := commit(cl, sent); err != nil {
				break // the kill
			}
			acked = sent
		}
		cl.Close()
		cmd.Wait()
	}
	t.Logf("%d kills; last commit acknowledged %d of %d sent", kills, acked, sent)
}
