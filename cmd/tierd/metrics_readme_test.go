package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/seglog"
)

// readmeKafkaMetrics returns the tierd metric names in the first column
// of docs/observing.md's table of metrics named after Kafka's.
func readmeKafkaMetrics(t *testing.T) []string {
	t.Helper()
	return docTableMetrics(t, "docs/observing.md", "Metrics named after Kafka's")
}

// docTableMetrics returns the tierd metric names in the first column
// of the table of a section (### title) of doc, a path from the
// repository's root.
func docTableMetrics(t *testing.T, doc, title string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### "+title+"\n")
	if !ok {
		_, section, ok = strings.Cut(string(data), "\n## "+title+"\n")
	}
	if !ok {
		t.Fatalf("%s has no section %q", doc, title)
	}
	section, _, _ = strings.Cut(section, "\n#") // the next heading
	name := regexp.MustCompile("`(tierd_[a-z_]+)")
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `tierd_") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %v in the table of %s", out, doc)
	}
	return out
}

// docAlertMetrics returns the tierd metric names in the yaml blocks of
// docs/observing.md's section "Alerts" (its example rules).
func docAlertMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "observing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/observing.md has no section \"Alerts\"")
	}
	var out []string
	for _, block := range strings.Split(section, "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, m := range regexp.MustCompile(`\b(tierd_[a-z_]+)`).FindAllStringSubmatch(block, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) < 5 {
		t.Fatalf("found only %v in the alert rules of docs/observing.md", out)
	}
	return out
}

// TestReadmeKafkaMetricsFromStart: a tierd that has just made its first
// pass (nothing read, nothing deleted yet) exposes every metric the
// docs/observing.md's table of Kafka-named metrics lists, counters of events that
// have not happened included, so that alerts and absent() work from the
// start; and every metric its example alert rules name.
func TestReadmeKafkaMetricsFromStart(t *testing.T) {
	root := t.TempDir()
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(filepath.Join(root, "logs", "orders-0"), scfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(seglog.Record{Value: demoValue(0)}) // an active segment only
	l.Close()
	httpAddr := freeAddr(t)
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), httpAddr)
	stop := startServe(t, cfgPath)
	defer stop()
	testtools.WaitFor(t, "a pass", func() bool { return healthy(httpAddr) && metricNumber(t, httpAddr, "tierd_copier_passes_total") >= 1 })
	metrics := get(t, "http://"+httpAddr+"/metrics")
	for _, name := range readmeKafkaMetrics(t) {
		if !strings.Contains(metrics, "\n# TYPE "+name+" ") {
			t.Errorf("%s (in docs/observing.md's table) is not on /metrics after the first pass", name)
		}
	}
	for _, name := range append(docAlertMetrics(t), "process_start_time_seconds") {
		if !strings.Contains(metrics, "\n# TYPE "+name+" ") {
			t.Errorf("%s (in docs/observing.md's alert rules) is not on /metrics after the first pass", name)
		}
	}
}
