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
	replay.addCPU(cpuSample{proc: 3, store: 1}, 1<<30) // 4 CPU-s/GiB
	seq.addCPU(cpuSample{proc: 1, store: 1}, 1<<30)    // 2
	floor := result("grpc_floor", time.Millisecond, 5, 1<<20)
	floor.addCPU(cpuSample{proc: 1.5, store: 0}, 1<<30) // 1.5: 4 / 3.5 = 1.14
	mem := result("replay_8", time.Millisecond, 1, 1)
	mem.PeakRSSMiB, mem.PeakTotalRSSMiB, mem.LimitMiB = &peak, &total, &limit
	rep := &Report{SegmentBytes: 32 << 20, ChunkBytes: 4 << 20, Results: []*Result{
		result("raw_get", 2*time.Millisecond, 5, 1<<20), result("fetch_cold", 3*time.Millisecond, 5, 1<<20),
		result("kafka_fetch_cold", 3300*time.Microsecond, 5, 1<<20), result("fetch_cold_stream", 2400*time.Microsecond, 5, 1<<20),
		result("fetch_warm", 1100*time.Microsecond, 5, 1<<20), floor,
		replay, kreplay, seq, mem,
	}, Series: []*Series{series("copy", "minio", "copy_over_raw_put", []int{8}, false, []float64{0.4}, []float64{0.5}, []float64{0.7})}}
	for _, r := range rep.Results {
		r.finish()
	}
	want := map[string]bool{"fetch_cold p50 / raw_get p50 = 1.50": false, "fetch_warm p50 / grpc_floor p50 = 1.10": true,
		"replay MiB/s / two-hop bound 1/(1/raw_seq_get + 1/grpc_floor) = 2.00": true, "replay CPU-s/GiB / (raw_seq_get + grpc_floor) CPU-s/GiB = 1.14": true,
		"copy MiB/s / raw_put MiB/s = 0.5 (>= 0.9); over 3 rounds 0.4-0.7": false, "replay GETs per MiB = 0.280": true, "replay_8 peak anonymous RSS 150 MiB": true,
		"kafka_fetch_cold p50 / fetch_cold p50 = 1.10": true, "kafka_replay MiB/s / replay MiB/s = 0.83": false,
		"fetch_cold_stream p50 / raw_get p50 = 1.20": false} // a note, never met
	checkTargets(t, rep.Targets(), want)
	var sb strings.Builder
	rep.WriteTable(&sb)
	if !strings.Contains(sb.String(), "MISS fetch_cold") || !strings.Contains(sb.String(), "MISS kafka_replay") ||
		!strings.Contains(sb.String(), "where the time goes") || !strings.Contains(sb.String(), "3.00+1.00") {
		t.Errorf("table:\n%s", sb.String())
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]float64{}
	for _, c := range []string{"fetch_cold", "replay", "replay_8", "kafka_replay", "kafka_fetch_cold", "raw_get"} {
		var v map[string]float64
		if err := json.Unmarshal(all[c], &v); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		m[c] = v
	}
	var ratio jsonSeries
	if err := json.Unmarshal(all["copy/minio copy_over_raw_put"], &ratio); err != nil || len(ratio.Values) != 3 || *ratio.Values[2][0] != 0.7 {
		t.Errorf("copy ratio in json: %v, %s", err, all["copy/minio copy_over_raw_put"])
	}
	// HDR histograms keep 3 significant digits.
	if math.Abs(m["fetch_cold"]["p50_us"]-3000) > 3 || m["replay"]["gets_per_mib"] != 0.28 || m["replay"]["mib_per_s"] != 1000 || m["replay_8"]["peak_anon_rss_mib"] != 150 ||
		m["kafka_replay"]["gets_per_mib"] != 0.28 || math.Abs(m["kafka_fetch_cold"]["p50_us"]-3300) > 4 ||
		m["replay"]["cpu_s_per_gib_proc"] != 3 || m["replay"]["cpu_s_per_gib_store"] != 1 {
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
	c.Cases, c.ScaleBuckets, c.Partitions, c.Copies, c.CaseTimeout = []string{"read", "scale"}, []string{"gcs"}, []int{100, 10}, []int{1}, 0
	err := c.Validate()
	for _, want := range []string{"two segments", "count", "latency", "remote.fetch.chunk.bytes", "rounds", `case "scale"`, `bucket "gcs"`,
		"partitions [100 10] must be positive and rising", "copies [1]: at least 2", "case timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// The two scales set the growth cases' sizes; small is the default.
func TestSetScale(t *testing.T) {
	c := DefaultConfig()
	if len(c.Partitions) != 2 || c.Partitions[1] != 50 || c.CaseTimeout != 3*time.Minute {
		t.Errorf("default sizes %v, timeout %s", c.Partitions, c.CaseTimeout)
	}
	if err := c.SetScale(ScaleFull); err != nil || c.Partitions[2] != 10000 || c.Copies[2] != 100000 || c.ReaderCounts[3] != 64 || c.Validate() != nil {
		t.Errorf("full: %v, %+v", err, c)
	}
	if err := c.SetScale("huge"); err == nil || !strings.Contains(err.Error(), "small or full") {
		t.Errorf("SetScale(huge) = %v", err)
	}
}

// checkTargets checks that got holds exactly one target per prefix of
// want (by count, and each target starting with one of them) and that
// each is met or missed as want says.
func checkTargets(t *testing.T, got []Target, want map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d targets, want %d:\n%v", len(got), len(want), got)
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
}

// TestReplayTargetsByRound: with rounds, the replay targets are judged on
// the median round, and the text gives the rounds' range and the first
// round; the breakdown names the first-touch probe.
func TestReplayTargetsByRound(t *testing.T) {
	replay := result("replay", time.Millisecond, 10, 1<<20)
	replay.wall = 10 * time.Millisecond
	replay.addCPU(cpuSample{proc: 9, store: 1}, 1<<30) // all rounds: 10 CPU-s/GiB, 2.86x the floors
	replay.RoundCPUPerGiB = []float64{12, 3.5, 4}      // median 4: 1.14x
	replay.RoundMiBPerS = []float64{100, 700, 450}     // median 450: 0.9 of the bound
	seq := result("raw_seq_get", time.Millisecond, 1, 1<<20)
	seq.wall = time.Millisecond
	seq.addCPU(cpuSample{proc: 1, store: 1}, 1<<30)
	floor := result("grpc_floor", time.Millisecond, 5, 1<<20)
	floor.addCPU(cpuSample{proc: 1.5, store: 0}, 1<<30)
	probe := 7.5
	rep := &Report{Results: []*Result{replay, seq, floor}, FirstTouchCPUPerGiB: &probe}
	for _, r := range rep.Results {
		r.finish()
	}
	seq.MiBPerS, floor.MiBPerS = 1000, 1000 // the bound: 500 MiB/s
	checkTargets(t, rep.Targets(), map[string]bool{
		"replay MiB/s (median of 3 rounds; by round 0.20-1.40 of the base, the first 0.20) / two-hop bound 1/(1/raw_seq_get + 1/grpc_floor) = 0.90": false,
		"replay CPU-s/GiB (median of 3 rounds; by round 1.00-3.43 of the base, the first 3.43) / (raw_seq_get + grpc_floor) CPU-s/GiB = 1.14":       true,
	})
	if b := strings.Join(rep.Breakdown(), "\n"); !strings.Contains(b, "first touch of memory on this machine costs 7.50 CPU-s per GiB") ||
		!strings.Contains(b, "first round used 12.00 CPU-s/GiB, its median round 4.00") {
		t.Errorf("breakdown:\n%s", b)
	}
	if v, ok := firstTouchProbe(); !ok || v <= 0 {
		t.Errorf("first-touch probe: %v %v", v, ok)
	}
}

// TestTableWithoutPointCases: a run of growth cases alone prints no empty
// table of point cases.
func TestTableWithoutPointCases(t *testing.T) {
	rep := &Report{Series: []*Series{series("copy", "minio", "copy_over_raw_put", []int{8}, false, []float64{0.95})}}
	var sb strings.Builder
	rep.WriteTable(&sb)
	if strings.Contains(sb.String(), "p50_us") || !strings.Contains(sb.String(), "copy_over_raw_put") {
		t.Fatalf("table:\n%s", sb.String())
	}
}
