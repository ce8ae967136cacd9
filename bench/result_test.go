package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func result(name string, lat time.Duration, n int, bytes int64) *Result {
	r := newResult(name)
	for i := 0; i < n; i++ {
		r.add(lat, bytes)
	}
	return r
}

// The targets are ratios of this run's results, checked both ways.
func TestTargets(t *testing.T) {
	gets, peak, total, limit := 0.28, 150.0, 190.0, 200.0
	replay := result("replay", time.Millisecond, 10, 1<<20)
	replay.wall = 10 * time.Millisecond // 1000 MiB/s
	replay.GetsPerMiB = &gets
	seq := result("raw_seq_get", 40*time.Millisecond, 1, 40<<20)
	seq.wall = 40 * time.Millisecond // 1000 MiB/s
	kreplay := result("kafka_replay", time.Millisecond, 10, 1<<20)
	kreplay.wall = 12 * time.Millisecond // 833 MiB/s: 0.83 of replay's
	kreplay.GetsPerMiB = &gets
	mem := result("replay_8", time.Millisecond, 1, 1)
	mem.PeakRSSMiB, mem.PeakTotalRSSMiB, mem.LimitMiB = &peak, &total, &limit
	rep := &Report{SegmentBytes: 32 << 20, ChunkBytes: 4 << 20, Results: []*Result{
		result("raw_get", 2*time.Millisecond, 5, 1<<20), result("fetch_cold", 3*time.Millisecond, 5, 1<<20),
		result("kafka_fetch_cold", 3300*time.Microsecond, 5, 1<<20),
		result("fetch_warm", 1100*time.Microsecond, 5, 1<<20), result("grpc_floor", time.Millisecond, 5, 1<<20),
		replay, kreplay, seq, mem,
	}}
	for _, r := range rep.Results {
		r.finish()
	}
	want := map[string]bool{"fetch_cold p50 / raw_get p50 = 1.50": false, "fetch_warm p50 / grpc_floor p50 = 1.10": true,
		"replay MiB/s / raw_seq_get MiB/s = 1.00": true, "replay GETs per MiB = 0.280": true, "replay_8 peak anonymous RSS 150 MiB": true,
		"kafka_fetch_cold p50 / fetch_cold p50 = 1.10": true, "kafka_replay MiB/s / replay MiB/s = 0.83": false}
	got := rep.Targets()
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d: %v", len(got), len(want), got)
	}
	for _, tg := range got {
		found := false
		for prefix, met := range want {
			if strings.HasPrefix(tg.Text, prefix) {
				found = true
				if tg.Met != met {
					t.Errorf("%q met = %v, want %v", tg.Text, tg.Met, met)
				}
			}
		}
		if !found {
			t.Errorf("unexpected target %q", tg.Text)
		}
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	if !strings.Contains(sb.String(), "MISS fetch_cold") || !strings.Contains(sb.String(), "MISS kafka_replay") ||
		!strings.Contains(sb.String(), "where the time goes") {
		t.Errorf("table:\n%s", sb.String())
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var m map[string]map[string]float64
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	// HDR histograms keep 3 significant digits.
	if math.Abs(m["fetch_cold"]["p50_us"]-3000) > 3 || m["replay"]["gets_per_mib"] != 0.28 || m["replay"]["mib_per_s"] != 1000 || m["replay_8"]["peak_anon_rss_mib"] != 150 ||
		m["kafka_replay"]["gets_per_mib"] != 0.28 || math.Abs(m["kafka_fetch_cold"]["p50_us"]-3300) > 4 {
		t.Errorf("json: %s", raw)
	}
	if _, ok := m["raw_get"]["gets_per_mib"]; ok {
		t.Errorf("raw_get has gets_per_mib: %s", raw)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.TotalBytes, c.Count, c.StoreLatency, c.ChunkBytes, c.Rounds = c.SegmentBytes, 0, -time.Second, 100, 0
	err := c.Validate()
	for _, want := range []string{"two segments", "count", "latency", "remote.fetch.chunk.bytes", "rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}
