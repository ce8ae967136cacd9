package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/seglog"
)

// TestKafkaGroupSurvivesCrash: a franz-go group consumer reads from the
// real "tierd run" binary and commits; tierd is killed with SIGKILL and
// started again on the same metadata dir. The group comes back from
// Pebble at its generation: the consumer, which stayed up, goes on
// without reading anything twice below what it had committed, reads
// every record, and the offsets it commits at the end are what kadm
// reads from the restarted tierd.
func TestKafkaGroupSurvivesCrash(t *testing.T) {
	t.Parallel()
	const parts, perPart = 3, 200
	bin, cfg, kafkaAddr, httpAddr := groupsTierd(t, parts, perPart)
	var logs lockedBuffer
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "--config", cfg)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	tierd := start()
	defer func() { tierd.Process.Kill(); tierd.Wait() }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumerGroup("survivor"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxPartitionBytes(2048), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	times := map[string]int{}
	read := func(until func() bool) {
		for !until() {
			fs := cl.PollRecords(ctx, 50)
			if ctx.Err() != nil {
				t.Fatalf("read %d distinct records of %d\n%s", len(times), parts*perPart, logs.String())
			}
			fs.EachRecord(func(r *kgo.Record) {
				k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
				times[k]++
			})
		}
	}
	read(func() bool { return len(times) >= parts*perPart/2 })
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	atCrash := map[int32]int64{}
	for tp, o := range cl.CommittedOffsets()["orders"] {
		atCrash[tp] = o.Offset
	}

	tierd.Process.Signal(syscall.SIGKILL)
	tierd.Wait()
	tierd = start()
	adm, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	var kept kadm.OffsetResponses
	for kept, err = kadm.NewClient(adm).FetchOffsets(ctx, "survivor"); err != nil; kept, err = kadm.NewClient(adm).FetchOffsets(ctx, "survivor") {
		if ctx.Err() != nil {
			t.Fatalf("the restarted tierd: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // tierd starting again
	}
	for p, want := range atCrash {
		if o, _ := kept.Lookup("orders", p); o.At != want {
			t.Errorf("orders-%d: %d committed before the crash, %d after it", p, want, o.At)
		}
	}

	read(func() bool { return len(times) == parts*perPart })
	for k, n := range times {
		var p int32
		var o int64
		fmt.Sscanf(k, "%d/%d", &p, &o)
		if n > 1 && o < atCrash[p] {
			t.Errorf("record %s read %d times, below the offset %d committed before the crash", k, n, atCrash[p])
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(adm).FetchOffsets(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		if o, ok := offs.Lookup("orders", p); !ok || o.At != perPart {
			t.Errorf("orders-%d committed at %+v after the restart, want %d", p, o, perPart)
		}
	}
	// /metrics: the member, and no lag left.
	m := scrape(t, "http://"+httpAddr+"/metrics")
	if n := m.sum("tierd_kafka_group_members", `group="survivor"`); n != 1 {
		t.Errorf("tierd_kafka_group_members{group=survivor} %v, want 1", n)
	}
	for p := 0; p < parts; p++ {
		if !m.has(fmt.Sprintf(`tierd_kafka_group_lag{group="survivor",partition="%d",topic="orders"} 0`, p)) {
			t.Errorf("no lag 0 for orders-%d in /metrics", p)
		}
	}
	// tierd status: the group, its member, no lag.
	out, err := exec.Command(bin, "status", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("tierd status: %v\n%s", err, out)
	}
	for p := 0; p < parts; p++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^  orders-%d +200 +200 +0 +\S+ /127\.0\.0\.1 kgo$`, p)).Match(out) {
			t.Errorf("tierd status has no line for orders-%d at 200, lag 0, with its member:\n%s", p, out)
		}
	}
	if !strings.Contains(string(out), "survivor: Stable, generation") {
		t.Errorf("tierd status does not show the group Stable:\n%s", out)
	}
	t.Logf("committed before the crash %v; every record read after the restart", atCrash)
}

// groupsTierd builds tierd and writes a tierd.yaml (filesystem bucket,
// created; kafka.listen and http.listen on free ports) over a log dir
// holding orders-0..parts-1 of perPart records each ("p-i"), written by
// seglog; it returns the binary, the config's path and the addresses.
func groupsTierd(t *testing.T, parts, perPart int) (bin, cfg, kafkaAddr, httpAddr string) {
	t.Helper()
	root := t.TempDir()
	bin = buildTierd(t)
	kafkaAddr, httpAddr = freePort(t), freePort(t)
	cfg = filepath.Join(root, "tierd.yaml")
	writeFile(t, cfg, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  log.retention.ms: -1
  log.local.retention.ms: -1
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: %s}
kafka:
  listen: %s
  group.initial.rebalance.delay.ms: 100
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freePort(t), httpAddr, kafkaAddr)))
	for p := 0; p < parts; p++ {
		l, err := seglog.Open(filepath.Join(root, "logs", fmt.Sprintf("orders-%d", p)), seglog.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perPart; i++ {
			if _, err := l.Append(seglog.Record{Value: []byte(fmt.Sprintf("%d-%d", p, i)), Timestamp: time.Now().UnixMilli()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bin, "bucket", "create", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("tierd bucket create: %v\n%s", err, out)
	}
	return bin, cfg, kafkaAddr, httpAddr
}
