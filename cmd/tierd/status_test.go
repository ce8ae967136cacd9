package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// TestStatusCommand: a partition missing from the broker's
// replication-offset-checkpoint is shown waiting for that reason by
// "tierd status" (table and --json), "tierd segments" and the metrics,
// next to one that is up to date; with tierd stopped, "tierd status"
// still says why.
func TestStatusCommand(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"orders-0", "orders-1"} {
		writePartition(t, filepath.Join(root, "logs", p), 600, 0)
	}
	if err := os.WriteFile(filepath.Join(root, "logs", kafkalog.ReplicationOffsetCheckpointFile), []byte("0\n1\norders 0 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, httpAddr)
	stop := startServe(t, cfgPath)
	// Wait for it to hold its metadata dir: a tool finding none running
	// opens the dir itself, and would keep a starting tierd out of it.
	for deadline := time.Now().Add(30 * time.Second); !healthy(httpAddr); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("tierd did not start")
		}
	}

	var out string
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, o, e := runCmd("status", "--config", cfgPath)
		if code == 0 && strings.Contains(o, "1 up_to_date") {
			out = o
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed orders-0 up to date: exit %d\n%s\n%s", code, o, e)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "status from the running tierd at "+fetchAddr) ||
		!strings.Contains(out, "2 partitions: 0 copying, 1 up_to_date, 1 waiting (not_in_checkpoint 1), 0 remote_only") {
		t.Fatalf("status:\n%s", out)
	}
	line := lineWith(out, "orders-1 ")
	for _, want := range []string{"waiting", "2 (", "not_in_checkpoint: the partition has no entry in the log dir's " + filepath.Join(root, "logs", kafkalog.ReplicationOffsetCheckpointFile)} {
		if !strings.Contains(line, want) {
			t.Errorf("orders-1 line lacks %q: %q", want, line)
		}
	}
	code, o, e := runCmd("status", "--config", cfgPath, "--json")
	var s remotelog.TieringStatus
	if err := json.Unmarshal([]byte(o), &s); code != 0 || err != nil || !s.Running || len(s.Partitions) != 2 ||
		s.Partitions[1].Reason != remotelog.WaitNotInCheckpoint || s.Partitions[1].PendingSegments != 2 || s.Partitions[0].HighestTieredOffset < 0 {
		t.Fatalf("--json: exit %d %v\n%s\n%s", code, err, o, e)
	}
	code, o, e = runCmd("segments", "--config", cfgPath)
	if code != 0 || !strings.Contains(lineAfter(o, "orders-1"), "status: waiting, 2 (") || !strings.Contains(lineAfter(o, "orders-0:"), "status: up_to_date") {
		t.Fatalf("segments: exit %d\n%s\n%s", code, o, e)
	}
	metrics := get(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{
		`tierd_copier_partitions_waiting{reason="not_in_checkpoint"} 1`,
		`tierd_remote_copy_lag_segments{partition="1",topic="orders"} 2`,
		`tierd_remote_copy_lag_segments{partition="0",topic="orders"} 0`,
		`tierd_remote_log_metadata_count{partition="0",topic="orders"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	code, o, e = runCmd("status", "--config", cfgPath)
	if code != 0 || !strings.Contains(o, "(tierd not running)") || !strings.Contains(lineWith(o, "orders-1 "), "not_in_checkpoint") ||
		!strings.Contains(lineWith(o, "orders-0 "), "up_to_date") {
		t.Fatalf("status of the stopped tierd: exit %d\n%s\n%s", code, o, e)
	}
}

func healthy(addr string) bool {
	resp, err := http.Get("http://" + addr + "/-/healthy")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// lineAfter returns the line after the first one starting with prefix.
func lineAfter(s, prefix string) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		if strings.HasPrefix(l, prefix) && i+1 < len(ls) {
			return ls[i+1]
		}
	}
	return ""
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// TestToolsBeforeFirstRun: before any `tierd run`, with no metadata dir
// or an empty one (made by the operator), status, segments and journal
// say that no tierd has run with this configuration, name the metadata
// dir, and create nothing there.
func TestToolsBeforeFirstRun(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), freeAddr(t))
	meta := filepath.Join(root, "metadata")
	run := func(state string) {
		t.Helper()
		for _, cmd := range []string{"status", "segments", "journal"} {
			code, o, e := runCmd(cmd, "--config", cfgPath)
			if code == 0 || !strings.Contains(e, "no tierd has run with this configuration yet") || !strings.Contains(e, meta) {
				t.Errorf("%s before the first run, %s: exit %d\nstdout: %s\nstderr: %s", cmd, state, code, o, e)
			}
		}
	}
	run("no metadata dir")
	if _, err := os.Stat(meta); !os.IsNotExist(err) {
		t.Fatalf("a tool created the metadata dir: %v", err)
	}
	if err := os.Mkdir(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	run("an empty metadata dir")
	if ents, err := os.ReadDir(meta); err != nil || len(ents) != 0 {
		t.Fatalf("a tool wrote in the empty metadata dir: %v %v", ents, err)
	}
}
