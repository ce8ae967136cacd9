package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/seglog"
)

// TestKafkaTierdRunBinary: the real "tierd run" binary with kafka.listen
// set in its tierd.yaml tiers a partition the segment log writes
// (local.retention.ms 0: every rolled segment copied, then deleted
// locally) and serves it to kcat, every record as written, from the
// remote copies and the active segment; /metrics then shows the
// listener's per-API metrics for what kcat asked.
func TestKafkaTierdRunBinary(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	root := t.TempDir()
	bin := buildTierd(t)
	kafkaAddr, httpAddr := freePort(t), freePort(t)
	cfg := filepath.Join(root, "tierd.yaml")
	writeFile(t, cfg, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 100
  file.delete.delay.ms: 0
  log.retention.ms: -1
  log.local.retention.ms: 0
  initial_retention_delay: 0s
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: %s}
kafka:
  listen: %s
`, filepath.Join(root, "logs"), filepath.Join(root, "bucket"), filepath.Join(root, "meta"), freePort(t), httpAddr, kafkaAddr)))

	// The partition: 600 records of about 8 KiB in 1 MiB segments, with
	// keys, a header and timestamps.
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = seglog.MinSegmentBytes
	dir := filepath.Join(root, "logs", "orders-0")
	l, err := seglog.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := time.Now().Add(-time.Hour).UnixMilli()
	var want []batch.Record
	for off := int64(0); off < 600; off++ {
		r := seglog.Record{Key: []byte(fmt.Sprintf("order-%d", off)), Value: bytes.Repeat([]byte(fmt.Sprintf("%d|", off)), 8000)[:8000],
			Timestamp: base + off, Headers: []seglog.RecordHeader{{Key: "n", Value: []byte(strconv.FormatInt(off, 10))}}}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		r.Offset = off
		want = append(want, r)
	}
	segs := l.Segments()
	active := segs[len(segs)-1].BaseOffset

	if out, err := exec.Command(bin, "bucket", "create", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("tierd bucket create: %v\n%s", err, out)
	}
	var stderr lockedBuffer
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("tierd run: %v\n%s", err, stderr.String())
		}
	}()
	// Tiered: only the active segment is left locally (a rolled segment
	// is deleted only after its copy was checked in the bucket).
	for end := time.Now().Add(60 * time.Second); !slices.Equal(localLogs(t, dir), []int64{active}); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("tierd run exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the %d rolled segments were not tiered: local segments %v\n%s", len(segs)-1, localLogs(t, dir), stderr.String())
		}
	}

	got, err := kcatAll(kcat, kafkaAddr, tpKey{Topic: "orders", Partition: 0})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if err := sameRecords(got, want); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	t.Logf("kcat read %d records through tierd run (%d segments tiered, the active one from %d local)", len(got), len(segs)-1, active)

	m := scrape(t, "http://"+httpAddr+"/metrics")
	for _, api := range []string{"ApiVersions", "Metadata", "ListOffsets", "Fetch"} {
		if m.sum("tierd_kafka_requests_total", `api="`+api+`"`) == 0 {
			t.Errorf("/metrics: no tierd_kafka_requests_total for api %s", api)
		}
		if m.sum("tierd_kafka_request_duration_seconds_count", `api="`+api+`"`) == 0 {
			t.Errorf("/metrics: no tierd_kafka_request_duration_seconds for api %s", api)
		}
	}
	if out, size := m.sum("tierd_kafka_bytes_out_total", `api="Fetch"`), float64(600*8000); out < size {
		t.Errorf("/metrics: tierd_kafka_bytes_out_total{api=\"Fetch\"} %v, below the %v value bytes kcat read", out, size)
	}
	if n := m.sum("tierd_kafka_connections_closed_total", `reason="unsupported_request"`) + m.sum("tierd_kafka_connections_closed_total", `reason="malformed_request"`); n != 0 {
		t.Errorf("/metrics: %v kcat connections refused", n)
	}
	if !m.has("tierd_kafka_connections ") {
		t.Errorf("/metrics lacks the gauge tierd_kafka_connections")
	}
}

// metricsText is a /metrics page in the Prometheus text format.
type metricsText []string

func scrape(t *testing.T, url string) metricsText {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	var lines metricsText
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// sum adds the values of the samples of name whose labels contain label.
func (m metricsText) sum(name, label string) float64 {
	total := 0.0
	for _, l := range m {
		if !strings.HasPrefix(l, name+"{") || !strings.Contains(l, label) {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// has says whether a line starts with prefix.
func (m metricsText) has(prefix string) bool {
	return slices.ContainsFunc(m, func(l string) bool { return strings.HasPrefix(l, prefix) })
}
