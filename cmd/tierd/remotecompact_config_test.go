package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/config"
)

// TestRemoteCompactionPerTopic: a topic's entry in copier.topics sets its
// remote compaction values over copier.remote_compaction's, config show
// lists them with their sources for compacted topics only, and a value
// out of range in a topic's entry is refused naming the topic.
func TestRemoteCompactionPerTopic(t *testing.T) {
	dir := t.TempDir()
	y := `copier:
  log_dirs: [/x]
  broker_id: 1
  topics:
    orders: {cleanup.policy: compact, min.cleanable.dirty.ratio: 0.1, delete.retention.ms: 60000}
    events: {segment.bytes: 5000}
  remote_compaction: {segment.bytes: 2000}
metadata: {dir: /m}
bucket: {filesystem: {dir: /b}}
`
	p := filepath.Join(dir, "tierd.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := showConfig(t.Context(), cfg, false, &out); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && (f[0] == "orders" || f[0] == "events") {
			rows[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
		}
	}
	for k, want := range map[string]string{
		"orders segment.bytes":             "2000 file (copier.remote_compaction.segment.bytes)",
		"orders min.cleanable.dirty.ratio": "0.1 file (copier.topics.orders)",
		"orders delete.retention.ms":       "60000 file (copier.topics.orders)",
		"events segment.bytes":             "",
		"events min.cleanable.dirty.ratio": "",
	} {
		if rows[k] != want {
			t.Errorf("config show %s: %q, want %q\n%s", k, rows[k], want, out.String())
		}
	}
	bad := strings.Replace(y, "min.cleanable.dirty.ratio: 0.1", "min.cleanable.dirty.ratio: 2", 1)
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p); err == nil || !strings.Contains(err.Error(), "topics: orders: min.cleanable.dirty.ratio 2 is out of range") {
		t.Fatalf("a ratio of 2 in a topic's entry: %v", err)
	}
}
