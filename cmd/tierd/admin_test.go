package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// The operator commands against a running tierd (over its Admin service)
// and a stopped one (on its metadata directly): a topic deletion is
// refused while its partition directory lives, scheduled once it is gone,
// shown by "segments", cancelled by "partitions restore", and every step
// is in "journal".
func TestOperatorCommands(t *testing.T) {
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-0"), 600, 0)
	fetchAddr := freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, "")
	stop := startServe(t, cfgPath)
	ctx := context.Background()
	c, err := grpcapi.Dial(fetchAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0})
		if err == nil && resp.HighestTieredOffset == 411 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not tiered: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, o, e := runCmd("topics", "delete", "--config", cfgPath, "orders")
	if code != 1 || !strings.Contains(e, "live partition directories") || !strings.Contains(e, "FailedPrecondition") {
		t.Fatalf("delete of a live topic: exit %d\n%s%s", code, o, e)
	}
	if err := os.RemoveAll(filepath.Join(root, "logs", "orders-0")); err != nil {
		t.Fatal(err)
	}
	// A remote-only partition is listed by the running tierd.
	code, o, e = runCmd("segments", "--config", cfgPath)
	if code != 0 || !strings.Contains(o, "orders-0: log start offset 0") {
		t.Fatalf("segments lacks the remote-only partition: exit %d\n%s%s", code, o, e)
	}
	// Another config whose fetch.listen this tierd serves is refused.
	otherRoot := t.TempDir()
	os.MkdirAll(filepath.Join(otherRoot, "logs"), 0o755)
	other := writeConfig(t, otherRoot, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, "")
	for _, args := range [][]string{{"journal", "--config", other}, {"segments", "--config", other}, {"topics", "delete", "--config", other, "orders"}} {
		// Its Admin service is not on TCP (no tokens, no mtls): no tool
		// with another metadata dir gets in.
		if code, o, e := runCmd(args...); code != 1 || !strings.Contains(e, "only to authenticated callers") {
			t.Fatalf("%v against another tierd: exit %d\n%s%s", args, code, o, e)
		}
	}
	code, o, e = runCmd("topics", "delete", "--config", cfgPath, "orders")
	if code != 0 || !strings.Contains(o, "the running tierd") || !strings.Contains(o, "orders-0") {
		t.Fatalf("delete: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCmd("segments", "--config", cfgPath)
	if code != 0 || !strings.Contains(o, "pending deletions") || !strings.Contains(o, "PENDING") || !strings.Contains(o, grpcapi.LocalCaller().Principal+" (admin socket, uid ") {
		t.Fatalf("segments: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCmd("partitions", "restore", "--config", cfgPath, "orders-0")
	if code != 0 || !strings.Contains(o, "restored") {
		t.Fatalf("restore: exit %d\n%s%s", code, o, e)
	}
	if resp, err := c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 0}); err != nil || resp.HighestTieredOffset != 411 {
		t.Fatalf("restored partition: %v %v", resp, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// tierd stopped: the commands act on its metadata.
	code, o, e = runCmd("topics", "delete", "--config", cfgPath, "orders")
	if code != 0 || !strings.Contains(o, "tierd not running") {
		t.Fatalf("delete, tierd stopped: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCmd("partitions", "restore", "orders-9", "--config", cfgPath) // flags after the argument too
	if code != 1 || !strings.Contains(e, "NotFound") {
		t.Fatalf("restore of nothing: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCmd("journal", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("journal: exit %d\n%s", code, e)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(o), "\n") {
		var j remotelog.JournalEntry
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		events = append(events, fmt.Sprintf("%s %s-%d", j.Event, j.TopicPartition.Topic, j.TopicPartition.Partition))
		if j.Event == remotelog.JournalScheduled && (j.Reason != remotelog.ReasonOperator || j.Segments != 2 || j.Bytes == 0 || j.DueMs <= j.TimeMs) {
			t.Errorf("scheduled entry %+v", j)
		}
	}
	want := "scheduled orders-0,cancelled orders-0,scheduled orders-0"
	if strings.Join(events, ",") != want {
		t.Fatalf("journal events %v, want %s\n%s", events, want, o)
	}
	// The operators are who the kernel says called on the admin socket,
	// and the tool's own user on a stopped tierd's metadata.
	if !strings.Contains(o, grpcapi.LocalCaller().Principal+" (admin socket, uid ") || !strings.Contains(o, grpcapi.LocalCaller().Principal+" (local)") {
		t.Fatalf("journal does not name the operators:\n%s", o)
	}
	if code, _, e := runCmd("journal", "--config", cfgPath, "--after", "2"); code != 0 {
		t.Fatalf("journal --after: %s", e)
	}
	if code, o, e := runCmd("journal", "--config", cfgPath, "--after", "3"); code != 0 || o != "" ||
		!strings.Contains(e, "no journal entries after sequence number 3") {
		t.Fatalf("journal past its end: exit %d, stdout %q, stderr %q", code, o, e)
	}
	// A rebuild keeps the scheduled deletion and the journal, and does not
	// bring the copies scheduled for deletion back.
	code, o, e = runCmd("rlmm", "rebuild", "--config", cfgPath, "--all")
	if code != 0 || !strings.Contains(o, "carried over 1 scheduled deletion(s) and 3 journal entries") {
		t.Fatalf("rebuild: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCmd("segments", "--config", cfgPath)
	if code != 0 || !strings.Contains(o, "PENDING") || strings.Contains(o, "COPY_SEGMENT_FINISHED") {
		t.Fatalf("segments after the rebuild: exit %d\n%s%s", code, o, e)
	}
	if code, o, _ := runCmd("journal", "--config", cfgPath); code != 0 || strings.Count(o, "\n") != 3 {
		t.Fatalf("journal after the rebuild:\n%s", o)
	}
}

// With a Kafka cluster configured and unreachable, /-/ready says so.
func TestReadyNamesTheCluster(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, httpAddr)
	f, _ := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "kafka:\n  bootstrap_servers: [\"%s\"]\n  request_timeout: 1s\n", freeAddr(t))
	f.Close()
	startServe(t, cfgPath)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/-/ready")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "kafka cluster unusable") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/-/ready never said the cluster is unusable: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
