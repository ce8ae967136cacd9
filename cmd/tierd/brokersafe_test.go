package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// writePartition writes n records at timestamp ts (0: now) into a new
// partition directory of seglog's smallest segments (several rolled).
func writePartition(t *testing.T, dir string, n int, ts int64) {
	t.Helper()
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(seglog.Record{Value: demoValue(int64(i)), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
}

const twoDirsYAML = `copier:
  log_dirs: [%s, %s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
  file.delete.delay.ms: 0
  initial_retention_delay: 0s
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: "%s"}
`

// tiered waits until the running tierd at fetchAddr has tiered topic-0
// through offset 411 (the last rolled segment of writePartition's 600).
func tiered(t *testing.T, c *grpcapi.Client, topic string) *tierdpb.ListSegmentsResponse {
	t.Helper()
	var resp *tierdpb.ListSegmentsResponse
	testtools.WaitFor(t, topic+"-0 tiered", func() bool {
		r, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: topic, Partition: 0})
		resp = r
		return err == nil && r.HighestTieredOffset == 411
	})
	return resp
}

// TestLogDirGoneWhileRunning: a tierd runs over two log dirs; the disk of
// one is unmounted (its files go, an empty mount point stays at its
// path), then the mount point goes too. Meanwhile /-/ready answers 503
// naming it, "tierd status" shows it unavailable and its partition held
// (not remote only), its copies stay, and "tierd topics delete" is
// refused with a clear error. Mounted again, tierd is ready and the
// partition is tiered as before.
func TestLogDirGoneWhileRunning(t *testing.T) {
	root := t.TempDir()
	logs, disk := filepath.Join(root, "logs"), filepath.Join(root, "disk")
	writePartition(t, filepath.Join(logs, "orders-0"), 600, 0)
	writePartition(t, filepath.Join(disk, "events-0"), 600, 0)
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	y := fmt.Sprintf(twoDirsYAML, logs, disk, filepath.Join(root, "bucket"), filepath.Join(root, "metadata"), fetchAddr, httpAddr)
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	bucketCreate(t, cfgPath)
	startServe(t, cfgPath)
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tiered(t, c, "orders")
	before := tiered(t, c, "events")
	testtools.WaitFor(t, "ready", func() bool { code, _ := readyAnswer(t, httpAddr); return code == 200 })

	for _, step := range []struct {
		name, says string
		unmount    func() error
	}{
		{"unmounted", "not the one this tierd locked at start", func() error {
			if err := os.Rename(disk, disk+".elsewhere"); err != nil {
				return err
			}
			return os.Mkdir(disk, 0o755) // the empty mount point
		}},
		{"mount point gone", "no such file or directory", func() error { return os.Remove(disk) }},
	} {
		if err := step.unmount(); err != nil {
			t.Fatal(err)
		}
		testtools.WaitFor(t, step.name+": /-/ready 503", func() bool {
			code, body := readyAnswer(t, httpAddr)
			return code == 503 && strings.Contains(body, disk) && strings.Contains(body, step.says)
		})
		var out string
		testtools.WaitFor(t, step.name+": tierd status shows events-0 held", func() bool {
			_, o, _ := runCmd("status", "--config", cfgPath)
			out = o
			return strings.Contains(out, "log_dir_unavailable")
		})
		for _, want := range []string{disk + ": UNAVAILABLE", "not ready: 1 log dir (" + disk + ") unavailable", logs + ": local retention by tierd",
			"0 remote_only"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: tierd status lacks %q:\n%s", step.name, want, out)
			}
		}
		code, o, e := runCmd("topics", "delete", "--config", cfgPath, "events")
		if code != 1 || !strings.Contains(e, "FailedPrecondition") || !strings.Contains(e, "missing or unreadable") || !strings.Contains(e, disk) {
			t.Fatalf("%s: topics delete events: exit %d\n%s%s", step.name, code, o, e)
		}
		resp, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "events", Partition: 0})
		if err != nil || len(resp.Segments) != len(before.Segments) || resp.LogStartOffset != 0 {
			t.Fatalf("%s: events-0's copies changed: %v %v", step.name, resp, err)
		}
		ds, err := dialSocketIn(t, root).Admin().ListDeletions(context.Background(), &tierdpb.ListDeletionsRequest{})
		if err != nil || len(ds.Deletions) != 0 {
			t.Fatalf("%s: deletions %v %v", step.name, ds, err)
		}
	}

	if err := os.Rename(disk+".elsewhere", disk); err != nil {
		t.Fatal(err)
	}
	testtools.WaitFor(t, "ready once mounted again", func() bool { code, _ := readyAnswer(t, httpAddr); return code == 200 })
	var out string
	testtools.WaitFor(t, "events-0 up to date again", func() bool {
		_, o, _ := runCmd("status", "--config", cfgPath)
		out = o
		return !strings.Contains(out, "log_dir_unavailable") && !strings.Contains(out, "UNAVAILABLE")
	})
	if code, o, e := runCmd("topics", "delete", "--config", cfgPath, "events"); code != 1 || !strings.Contains(e, "live partition directories") {
		t.Fatalf("topics delete events once back: exit %d\n%s%s", code, o, e)
	}
}

// TestInitialRetentionRun: "tierd run" on a new metadata dir over old
// data (ten days old, retention.ms one day, local.retention.ms 0) copies
// but deletes nothing, says what it would delete, and records the
// metadata dir's creation; restarted with --retention-go-ahead, it
// deletes as retention says, and records that it went ahead.
func TestInitialRetentionRun(t *testing.T) {
	root := t.TempDir()
	logDir := filepath.Join(root, "logs")
	writePartition(t, filepath.Join(logDir, "orders-0"), 600, time.Now().Add(-240*time.Hour).UnixMilli())
	fetchAddr := freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	y := fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
  file.delete.delay.ms: 0
  log.retention.ms: 86400000
  log.local.retention.ms: 0
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: ""}
`, logDir, filepath.Join(root, "bucket"), filepath.Join(root, "metadata"), fetchAddr)
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	bucketCreate(t, cfgPath)
	start := func(args ...string) (stop func() string) {
		var logs lockedBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() { done <- run(ctx, append([]string{"run", "--config", cfgPath}, args...), &logs, &logs) }()
		var once bool
		stop = func() string {
			if !once {
				once = true
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("tierd run %v: exit %d\n%s", args, code, logs.String())
				}
			}
			return logs.String()
		}
		t.Cleanup(func() { stop() })
		return stop
	}
	stop := start()
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := dialSocketIn(t, root)
	first := tiered(t, c, "orders")
	// Passes go on; none deletes.
	passes := func() int64 {
		r, err := admin.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{})
		if err != nil {
			return 0
		}
		return r.Passes
	}
	p0 := passes()
	testtools.WaitFor(t, "three more passes", func() bool { return passes() >= p0+3 })
	resp, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0})
	if err != nil || resp.LogStartOffset != 0 || len(resp.Segments) != len(first.Segments) {
		t.Fatalf("remote copies deleted while retention waits: %v %v", resp, err)
	}
	locals := func() int {
		ents, _ := filepath.Glob(filepath.Join(logDir, "orders-0", "*.log"))
		return len(ents)
	}
	if n := locals(); n != len(first.Segments)+1 {
		t.Fatalf("%d local segments while retention waits, want %d", n, len(first.Segments)+1)
	}
	st, err := admin.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{Topic: "orders"})
	if err != nil || len(st.Partitions) != 1 || !strings.Contains(st.Partitions[0].Detail, "retention waits until") {
		t.Fatalf("status while retention waits: %v %v", st, err)
	}
	out := stop()
	for _, want := range []string{"new metadata dir: retention deletes nothing until initial_retention_delay is over",
		"retention waits for initial_retention_delay", "partition=orders-0", "tier=local", "tier=remote", "base_offset=0", "end_offset=411"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	var rec daemon.Created
	data, err := os.ReadFile(filepath.Join(root, "metadata", daemon.CreatedFile))
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.CreatedMs <= 0 || rec.RetentionGoAheadMs != 0 {
		t.Fatalf("%s: %s %v", daemon.CreatedFile, data, err)
	}

	stop = start("--retention-go-ahead")
	testtools.WaitFor(t, "retention after --retention-go-ahead", func() bool {
		r, err := c.API().ListSegments(context.Background(), &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0})
		return err == nil && r.LogStartOffset == 412 && locals() == 1
	})
	if out := stop(); !strings.Contains(out, "retention goes ahead on this metadata dir") {
		t.Errorf("log lacks the go-ahead:\n%s", out)
	}
	data, _ = os.ReadFile(filepath.Join(root, "metadata", daemon.CreatedFile))
	if json.Unmarshal(data, &rec) != nil || rec.RetentionGoAheadMs <= 0 {
		t.Fatalf("go-ahead not recorded: %s", data)
	}
}

// TestRebuildKeepsInitialRetention: "tierd rlmm rebuild" over a lost
// metadata dir makes a new metadata dir, so the tierd run after it waits
// out initial_retention_delay as after any loss of the metadata dir; a
// rebuild of a metadata dir that is still there carries its record over
// (the wait in progress, a go-ahead) with its instance id.
func TestRebuildKeepsInitialRetention(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), "")
	meta := filepath.Join(root, "metadata")
	rebuild := func() {
		t.Helper()
		if code, out, errOut := runCmd("rlmm", "rebuild", "--config", cfgPath); code != 0 {
			t.Fatalf("rlmm rebuild: %d\n%s\n%s", code, out, errOut)
		}
		olds, _ := filepath.Glob(meta + ".old-*") // (named by the second: the next rebuild may come within it)
		for _, o := range olds {
			os.RemoveAll(o)
		}
	}
	later := time.Now().Add(time.Hour)

	rebuild() // no metadata dir: lost
	created, err := daemon.MetadataCreated(meta, false, later, log)
	if err != nil {
		t.Fatal(err)
	}
	if created <= 0 || created > later.UnixMilli() {
		t.Fatalf("after a rebuild over a lost metadata dir: created %d, want the rebuild's time: retention must wait", created)
	}

	rebuild() // the dir is there: its record goes with it
	if got, err := daemon.MetadataCreated(meta, false, later, log); err != nil || got != created {
		t.Fatalf("after a rebuild of a metadata dir: created %d %v, want %d carried over", got, err, created)
	}
	if got, err := daemon.MetadataCreated(meta, true, later, log); err != nil || got != 0 {
		t.Fatalf("go ahead: %d %v", got, err)
	}
	rebuild()
	if got, err := daemon.MetadataCreated(meta, false, later, log); err != nil || got != 0 {
		t.Fatalf("after a rebuild of a metadata dir that went ahead: created %d %v, want 0", got, err)
	}
}
