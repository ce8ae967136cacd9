package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

func series(c, variant, metric string, sizes []int, growth bool, rows ...[]float64) *Series {
	s := newSeries(c, variant, metric, sizes, len(rows), growth)
	for r, row := range rows {
		for i, v := range row {
			s.set(r, i, v)
		}
	}
	return s
}

// Growth per tenfold is the ratio of neighbouring sizes scaled to a
// tenfold step, per round; a round missing either size has none.
func TestGrowthPerTenfold(t *testing.T) {
	s := series("scale_partitions", "filesystem", "idle_pass_cpu_s", []int{10, 100, 1000}, true,
		[]float64{1, 10, 1000}, []float64{2, 40, math.NaN()})
	if g := s.GrowthPerTenfold(1); len(g) != 2 || g[0] != 10 || g[1] != 20 {
		t.Errorf("10->100: %v, want [10 20]", g)
	}
	if g := s.GrowthPerTenfold(2); len(g) != 1 || g[0] != 100 {
		t.Errorf("100->1000: %v, want [100] (round 2 has no value at 1000)", g)
	}
	q := series("scale_segments", "minio", "segments_cmd_s", []int{20, 2000}, true, []float64{1, 100})
	if g := q.GrowthPerTenfold(1); len(g) != 1 || math.Abs(g[0]-10) > 1e-9 {
		t.Errorf("a hundredfold step of 100x is 10x per tenfold, got %v", g)
	}
	if sp, _ := spreadOf([]float64{3, 1, 2}); sp.med != 2 || sp.lo != 1 || sp.hi != 3 {
		t.Errorf("spread %+v", sp)
	}
}

// The growth targets are judged on the median over rounds and show the
// spread; a size that timed out is reported as such, in the table and
// the targets, and as null in the JSON.
func TestGrowthTargets(t *testing.T) {
	idle := series("scale_partitions", "filesystem", "idle_pass_cpu_s", []int{100, 1000, 10000}, true,
		[]float64{0.1, 0.9, 8}, []float64{0.1, 1.3, 9}, []float64{0.1, 1.1, 10})
	first := series("scale_partitions", "filesystem", "first_pass_cpu_s", []int{100, 1000, 10000}, true,
		[]float64{1, 20, math.NaN()})
	first.TimedOut[2] = timedOut(30 * time.Minute)
	reqs := series("scale_partitions", "filesystem", "idle_pass_bucket_requests", []int{100, 1000, 10000}, false, []float64{0, 0, 0})
	syncs := series("scale_partitions", "filesystem", "idle_pass_synced_writes", []int{100, 1000, 10000}, false, []float64{100, 1000, 10000})
	cached := series("scale_segments", "minio", "fetch_cached_p50_ms", []int{1000, 10000, 100000}, false, []float64{0.1, 0.1, 0.1}, []float64{0.1, 0.1, 0.1})
	after := series("scale_segments", "minio", "fetch_after_write_p50_ms", []int{1000, 10000, 100000}, false, []float64{0.1, 0.1, 0.15}, []float64{0.1, 0.1, 0.3})
	fetched := series("readers", "seq", "fetched_per_served", []int{1, 8, 64}, false, []float64{1, 1.1, 1.1})
	broker := series("readers", "broker", "fetched_per_served", []int{1, 2}, false, []float64{1, 1.3})
	rate := series("readers", "seq", "mib_per_s", []int{1, 8, 64}, false, []float64{100, 300, 200})
	p99 := series("readers", "seq", "p99_ms", []int{1, 8, 64}, false, []float64{10, 20, 30})
	rep := &Report{IdleInterval: 30 * time.Second, Series: []*Series{idle, first, reqs, syncs, cached, after, fetched, broker, rate, p99}}
	want := map[string]bool{
		"scale_partitions/filesystem idle_pass_cpu_s growth per tenfold, 100 -> 1000 = 11 (<= 12); over 3 rounds 9-13": true, // the worse step
		"scale_partitions/filesystem first_pass_cpu_s growth per tenfold, 100 -> 1000 = 20":                            false,
		"scale_partitions/filesystem first_pass_cpu_s at 10000: timed out after 30m0s":                                 false,
		"scale_partitions/filesystem idle pass CPU at 10000 partitions / interval (30s) = 0.3":                         false,
		"scale_partitions/filesystem idle_pass_bucket_requests at 10000 partitions = 0 (<= 0)":                         true,
		"scale_partitions/filesystem idle_pass_synced_writes at 10000 partitions = 10000":                              false,
		"scale_segments/minio Fetch p50 after a metadata write / cached at 100000 copies = 2.25":                       false, // median of 1.5 and 3
		"readers seq, 8 readers: bytes fetched / bytes served = 1.1":                                                   true,
		"readers seq, 1 readers: bytes fetched / bytes served = 1 (<= 1.20)":                                           true, // notes at the other sizes
		"readers seq, 64 readers: bytes fetched / bytes served = 1.10 (<= 1.20)":                                       true,
		"readers broker, 2 readers: bytes fetched / bytes served = 1.30 (<= 1.20); the target is stated at 8 readers":  false, // judged at the size nearest 8
		"readers broker, 1 readers: bytes fetched / bytes served = 1 (<= 1.20)":                                        true,
		"readers seq: MiB/s at 64 readers / best N = 0.667":                                                            false,
		"readers seq: p99 at 64 readers / p99 at 1 = 3":                                                                true,
	}
	targets := rep.growthTargets()
	checkTargets(t, targets, want)
	for _, tg := range targets {
		judged := strings.HasPrefix(tg.Text, "readers seq, 8 readers") || strings.HasPrefix(tg.Text, "readers broker, 2 readers")
		if strings.Contains(tg.Text, "bytes fetched / bytes served") && tg.Note == judged {
			t.Errorf("%q: note %v, want a note unless judged", tg.Text, tg.Note)
		}
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	for _, w := range []string{"timed out after 30m0s", "8.89 (6.92-9.09)x", "MISS scale_segments/minio Fetch p50", "x10 1000->10000"} {
		if !strings.Contains(sb.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, sb.String())
		}
	}
	path := filepath.Join(t.TempDir(), "g.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var m map[string]jsonSeries
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	js := m["scale_partitions/filesystem first_pass_cpu_s"]
	if len(js.Values) != 1 || js.Values[0][2] != nil || *js.Values[0][1] != 20 || js.TimedOut[2] == "" {
		t.Errorf("json: %s", raw)
	}
	// Only growth cases: no latency plot, and no error.
	noLatency := filepath.Join(t.TempDir(), "l.png")
	if err := rep.WritePlot(noLatency); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(noLatency); err == nil {
		t.Errorf("a latency plot without latency cases")
	}
	plot := filepath.Join(t.TempDir(), "b.svg")
	if err := rep.WriteGrowthPlot(plot); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(plot); !bytes.Contains(data, []byte("idle_pass_cpu_s")) {
		t.Errorf("the growth plot has no idle_pass_cpu_s line")
	}
}

// The request counter counts every call to the bucket, and the sync
// counter every sync of the real Pebble store's files: one or more per
// acknowledged write, none for a read.
func TestCounters(t *testing.T) {
	dir := t.TempDir()
	fb, err := filesystem.New(filesystem.Config{Dir: filepath.Join(dir, "b")})
	if err != nil {
		t.Fatal(err)
	}
	b := rsm.Count(fb)
	ctx := context.Background()
	b.Upload(ctx, "a/x", strings.NewReader("x"), 1)
	b.Attributes(ctx, "a/x")
	b.Iter(ctx, "a/", func(string) error { return nil })
	b.Delete(ctx, "a/x")
	if n := b.Total(); n != 4 {
		t.Errorf("%d requests counted, want 4", n)
	}
	var syncs atomic.Int64
	store, err := metaStore(filepath.Join(dir, "m"), &syncs)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tp := remotelog.TopicPartition{Topic: "t", Partition: 0}
	before := syncs.Load()
	if err := store.EnsurePartition(tp, 0); err != nil {
		t.Fatal(err)
	}
	afterWrite := syncs.Load()
	if _, _, err := store.Offsets(tp); err != nil {
		t.Fatal(err)
	}
	if afterWrite <= before || syncs.Load() != afterWrite {
		t.Errorf("syncs: %d before a write, %d after it, %d after a read", before, afterWrite, syncs.Load())
	}
	if c := cpuSeconds(os.Getpid()); c < 0 {
		t.Errorf("cpuSeconds of this process = %v", c)
	}
	if c := cpuSeconds(1 << 30); c != -1 {
		t.Errorf("cpuSeconds of no process = %v, want -1", c)
	}
}

func scaleEnv(t *testing.T) *env {
	cfg := DefaultConfig()
	cfg.ScaleBuckets, cfg.Rounds = []string{"filesystem"}, 1
	return &env{cfg: cfg, dir: t.TempDir(), progress: &bytes.Buffer{}}
}

// scale_partitions on the filesystem bucket at two small sizes: every
// rolled segment is copied by the first pass (checked inside), and the
// idle pass's measures are there. A size that does not finish within
// the case timeout is reported as timed out, not failed, and the larger
// sizes are skipped.
func TestScalePartitions(t *testing.T) {
	e := scaleEnv(t)
	e.cfg.Partitions = []int{2, 6}
	ss, err := e.scalePartitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		for i := range s.Sizes {
			if v := s.Values[0][i]; math.IsNaN(v) || v < 0 {
				t.Errorf("%s at %d = %v", s.Name(), s.Sizes[i], v)
			}
		}
		if s.Metric == "idle_pass_synced_writes" && s.Values[0][0] > s.Values[0][1] {
			t.Errorf("%s fell with the partitions: %v", s.Name(), s.Values[0])
		}
	}
	e = scaleEnv(t)
	e.cfg.Partitions, e.cfg.CaseTimeout = []int{4, 40}, time.Nanosecond
	ss, err = e.scalePartitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.TimedOut[0] != "timed out after 1ns" || s.TimedOut[1] != "" || !math.IsNaN(s.Values[0][0]) || !math.IsNaN(s.Values[0][1]) {
			t.Errorf("%s: timed out %q, values %v", s.Name(), s.TimedOut, s.Values)
		}
	}
}

// scale_segments on the filesystem bucket: the copies are seeded (see
// TestSeedMatchesCopier), every Fetch answers the one batch of its copy,
// and the retention pass deletes exactly the older half (both checked
// inside).
func TestScaleSegments(t *testing.T) {
	e := scaleEnv(t)
	e.cfg.Copies = []int{4, 12}
	ss, err := e.scaleSegments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		for i := range s.Sizes {
			v := s.Values[0][i]
			if s.Metric == "segments_cmd_s" { // no tierd binary in a unit test
				if !math.IsNaN(v) {
					t.Errorf("%s measured without a binary: %v", s.Name(), v)
				}
				continue
			}
			if math.IsNaN(v) || v < 0 {
				t.Errorf("%s at %d = %v", s.Name(), s.Sizes[i], v)
			}
		}
	}
}

// Beside the p99 target of readers_N, the notes give the mean latency
// ratio Little's law makes from the same run's MiB/s (N x MiB/s at 1 /
// MiB/s at N) and p99/p50 at the largest N and at 1; they are no targets.
func TestReadersLatencyNotes(t *testing.T) {
	sizes := []int{1, 8, 64}
	rep := &Report{Series: []*Series{
		series("readers", "random", "mib_per_s", sizes, false, []float64{50, 60, 40}),
		series("readers", "random", "mean_ms", sizes, false, []float64{20, 130, 1500}),
		series("readers", "random", "p50_ms", sizes, false, []float64{15, 120, 1400}),
		series("readers", "random", "p99_ms", sizes, false, []float64{30, 400, 2800}),
	}}
	var notes []string
	for _, tg := range rep.growthTargets() {
		if tg.Note {
			notes = append(notes, tg.Text)
		}
	}
	want := []string{
		"readers random: Little's law from this run's MiB/s: mean latency at 64 readers / at 1 = 64 x 50 / 40 = 80 (measured 75); p99 <= 4x needs MiB/s at 64 >= 16 x MiB/s at 1",
		"readers random: tail fairness: p99/p50 at 64 readers = 2, at 1 = 2",
	}
	if len(notes) != len(want) {
		t.Fatalf("notes %q, want %d", notes, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(notes[i], w) {
			t.Errorf("note %q, want it to start with %q", notes[i], w)
		}
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	if !strings.Contains(sb.String(), "  note readers random: tail fairness") {
		t.Errorf("table:\n%s", sb.String())
	}
}

// Each of N readers reads ReaderTotalBytes / N, or ReaderBytes when set.
func TestReaderBytes(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetScale(ScaleFull); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]int64{1: 4 << 30, 8: 512 << 20, 64: 64 << 20} {
		if got := c.readerBytes(n); got != want {
			t.Errorf("full, %d readers: %d bytes each, want %d", n, got, want)
		}
	}
	c.ReaderBytes = 1 << 20
	if got := c.readerBytes(8); got != 1<<20 {
		t.Errorf("--reader-bytes 1 MiB: %d bytes each at 8 readers", got)
	}
}
