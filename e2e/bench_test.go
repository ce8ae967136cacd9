package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestBench runs "tierd bench" as a user would, at small sizes, against
// a MinIO it starts itself: every case runs and checks the bytes it reads
// (the Kafka cases through tierd's Kafka listener), the memory and
// readers cases run against "tierd run" children, the scale cases run
// on both buckets at tiny sizes, and the table, the JSON, the targets
// and both plot formats come out.
func TestBench(t *testing.T) {
	if rsmtest.FindMinIO() == "" {
		rsmtest.StartMinIO(t) // skips, or fails under CI, with the reason
	}
	dir := t.TempDir()
	bin := buildTierd(t)
	// The plugin cases need a JDK: with one, the plugin and its driver
	// are built into ../bin and the cases run; without, they are skipped
	// with a note, and the rest of the run goes on.
	jars, withJava := filepath.Join("..", "bin"), hasJDK()
	if withJava {
		buildDriver(t)
	} else {
		jars = t.TempDir()
	}
	jsonPath, png, svg := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.png"), filepath.Join(dir, "b.svg")
	args := []string{"bench", "--segment-bytes", "1048576", "--total-bytes", "6291456", "--count", "30", "--readers", "3",
		"--max-bytes", "65536", "--chunk-bytes", "262144", "--cache-memory-bytes", "1048576", "--prefetch-bytes", "524288",
		"--rounds", "2", "--cases", "read,copy,readers,plugin", "--reader-counts", "1,2", "--reader-bytes", "1048576",
		"--kafka-rsm-jars", jars, "--json", jsonPath, "--plot", png}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("tierd bench: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if strings.Contains(errb.String(), "were not uploaded through this client") {
		t.Errorf("the run left objects behind in its prefix:\n%s", errb.String())
	}
	checkPluginCases(t, out.String(), jsonPath, withJava)
	cases := []string{"raw_get", "fetch_cold", "fetch_cold_stream", "kafka_fetch_cold", "fetch_cold_all", "fetch_warm", "local_read", "grpc_floor", "raw_seq_get",
		"replay", "kafka_replay", "replay_3", "copy", "raw_put"}
	for _, c := range cases {
		if !strings.Contains(out.String(), c) {
			t.Errorf("table has no %s row:\n%s", c, out.String())
		}
	}
	for _, want := range []string{"tierd run child", "targets (ratios from this run)", "kafka_fetch_cold p50 / fetch_cold p50 = ",
		"kafka_replay MiB/s / replay MiB/s = ", "fetch_cold_stream p50 / raw_get p50 = ", "copy MiB/s / raw_put MiB/s = ",
		"replay CPU-s/GiB (median of 2 rounds; ", ") / (raw_seq_get + grpc_floor) CPU-s/GiB = ", "first touch of memory on this machine costs ",
		"readers/seq", "readers/random", "readers/broker", "readers random: p99 at 2 readers / p99 at 1 = ",
		"readers seq, 2 readers: bytes fetched / bytes served = ", "readers broker, 2 readers: bytes fetched / bytes served = "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range []string{"replay", "kafka_replay"} { // the two replays took turns, twice each
		if !regexp.MustCompile(`(?m)^` + c + `: MiB/s by round \d+, \d+; CPU-s/GiB proc\+store by round [0-9.+]+, [0-9.+]+$`).MatchString(out.String()) {
			t.Errorf("no two rounds of %s in the notes:\n%s", c, out.String())
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage // cases are objects of numbers, growth measures hold arrays
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatalf("--json: %v\n%s", err, raw)
	}
	got := map[string]map[string]float64{}
	rounds := map[string]map[string][]float64{} // the per-round arrays of the cases run in rounds
	for _, c := range cases {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(all[c], &fields); err != nil {
			t.Fatalf("--json %s: %v\n%s", c, err, raw)
		}
		got[c], rounds[c] = map[string]float64{}, map[string][]float64{}
		for k, f := range fields {
			var x float64
			if err := json.Unmarshal(f, &x); err == nil {
				got[c][k] = x
				continue
			}
			var xs []float64
			if err := json.Unmarshal(f, &xs); err != nil {
				t.Fatalf("--json %s %s: neither a number nor numbers: %s", c, k, f)
			}
			rounds[c][k] = xs
		}
	}
	for _, c := range []string{"replay", "kafka_replay"} {
		if r := rounds[c]; len(r["mib_per_s_by_round"]) != 2 || len(r["cpu_s_per_gib_by_round"]) != 2 || r["mib_per_s_by_round"][1] <= 0 {
			t.Errorf("--json %s: per-round values %v, want two rounds of each", c, r)
		}
	}
	for _, c := range cases {
		r, ok := got[c]
		if !ok || r["count"] < 1 || r["p50_us"] <= 0 || r["p99_us"] < r["p50_us"] || r["p999_us"] < r["p99_us"] || r["mib_per_s"] <= 0 {
			t.Errorf("--json %s = %v", c, r)
		}
	}
	for _, c := range []string{"replay", "kafka_replay"} {
		if g := got[c]["gets_per_mib"]; g <= 0 || g > 10 {
			t.Errorf("%s gets_per_mib = %v", c, g)
		}
	}

	if m := got["replay_3"]["peak_anon_rss_mib"]; m <= 0 {
		t.Errorf("replay_3 peak_anon_rss_mib = %v", m)
	}
	for _, c := range []string{"replay", "raw_seq_get", "grpc_floor"} {
		if got[c]["cpu_s_per_gib_proc"] <= 0 {
			t.Errorf("%s cpu_s_per_gib_proc = %v", c, got[c]["cpu_s_per_gib_proc"])
		}
	}
	// readers_N's measures are keyed by case, pattern and measure, one
	// row per round, one value per number of readers.
	var growth map[string]struct {
		Sizes  []int        `json:"sizes"`
		Values [][]*float64 `json:"values"`
	}
	json.Unmarshal(raw, &growth)
	if g := growth["readers/seq fetched_per_served"]; len(g.Sizes) != 2 || len(g.Values) != 2 || g.Values[1][1] == nil || *g.Values[1][1] <= 0 {
		t.Errorf("--json readers/seq fetched_per_served = %+v", g)
	}

	// The scale cases at tiny sizes, one round: every measure of every
	// size is there, and the growth plot is drawn.
	scaleJSON := filepath.Join(dir, "s.json")
	sargs := []string{"bench", "--cases", "scale_partitions,scale_segments", "--partitions", "2,20", "--copies", "4,40", "--rounds", "1",
		"--json", scaleJSON, "--plot", filepath.Join(dir, "s.png")}
	if out, err := exec.Command(bin, sargs...).CombinedOutput(); err != nil {
		t.Fatalf("tierd bench %v: %v\n%s", sargs, err, out)
	} else if !strings.Contains(string(out), "growth per tenfold") {
		t.Errorf("no growth targets:\n%s", out)
	}
	raw, _ = os.ReadFile(scaleJSON)
	growth = nil
	json.Unmarshal(raw, &growth)
	for _, k := range []string{"scale_partitions/filesystem idle_pass_cpu_s", "scale_partitions/minio idle_pass_synced_writes",
		"scale_segments/filesystem fetch_after_write_p50_ms", "scale_segments/minio segments_cmd_s", "scale_segments/minio retention_pass_wall_s"} {
		g := growth[k]
		if len(g.Values) != 1 || len(g.Values[0]) != 2 || g.Values[0][0] == nil || g.Values[0][1] == nil {
			t.Errorf("--json %q = %+v\n%s", k, g, raw)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "s-growth.png")); !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("no growth plot s-growth.png")
	}
	if data, _ := os.ReadFile(png); !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("--plot %s is not a PNG", png)
	}
	// The plot format follows the extension; a bad extension is refused
	// before anything runs.
	small := []string{"bench", "--segment-bytes", "1048576", "--total-bytes", "3145728", "--count", "5", "--readers", "2", "--cases", "read", "--plot", svg}
	if out, err := exec.Command(bin, small...).CombinedOutput(); err != nil {
		t.Fatalf("tierd bench --plot .svg: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(svg); !bytes.Contains(data, []byte("<svg")) {
		t.Errorf("--plot %s is not an SVG", svg)
	}
	out2, err := exec.Command(bin, "bench", "--plot", filepath.Join(dir, "b.gif")).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out2), ".png or .svg") {
		t.Errorf("--plot b.gif: exit %d, %s", code, out2)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// hasJDK reports whether java and javac are on PATH.
func hasJDK() bool {
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// checkPluginCases checks the plugin cases' rows, notes, targets and
// JSON in a run's output; without a JDK, that they were skipped with a
// note.
func checkPluginCases(t *testing.T, out, jsonPath string, withJava bool) {
	t.Helper()
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	if !withJava {
		if !strings.Contains(out, "n/a  plugin cases skipped: ") || all["plugin_skipped"] == nil {
			t.Errorf("without a JDK the plugin cases are skipped with a note:\n%s", out)
		}
		return
	}
	for _, c := range []string{"plugin_copy", "jvm_raw_put", "jvm_raw_get", "plugin_fetch_cold", "plugin_fetch_warm"} {
		var r struct {
			Count   int                `json:"count"`
			P50     float64            `json:"p50_us"`
			MiBPerS float64            `json:"mib_per_s"`
			CPU     map[string]float64 `json:"cpu_s_per_gib_by_process"`
		}
		if err := json.Unmarshal(all[c], &r); err != nil || r.Count < 1 || r.P50 <= 0 || r.MiBPerS <= 0 {
			t.Errorf("--json %s = %s (%v)", c, all[c], err)
		}
		for _, p := range []string{"jvm", "tierd", "minio"} {
			if _, ok := r.CPU[p]; !ok {
				t.Errorf("--json %s: no CPU-s/GiB of %s: %v", c, p, r.CPU)
			}
		}
	}
	for _, want := range []string{"plugin_fetch_cold MiB/s / jvm_raw_get MiB/s = ", "plugin_fetch_warm MiB/s / jvm_raw_get MiB/s = ",
		"plugin_copy MiB/s / jvm_raw_put MiB/s = ", "plugin_readers, 2 readers: bytes fetched / bytes served = ",
		"plugin_readers from 1 to 2 readers (medians): ", "plugin_fetch_cold p50 / jvm_raw_get p50 = ",
		// Every cold read made one GET, every warm read none.
		"tierd made 1.00 GETs per read (cold and warm together"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var series map[string]struct {
		Sizes  []int        `json:"sizes"`
		Values [][]*float64 `json:"values"`
	}
	json.Unmarshal(raw, &series)
	for _, k := range []string{"plugin_readers/broker fetched_per_served", "plugin_readers/broker tierd_cpu_s_per_gib", "plugin/fetch cold_over_raw_get", "plugin/copy copy_over_raw_put"} {
		g := series[k]
		if len(g.Values) != 2 || g.Values[1][len(g.Sizes)-1] == nil || *g.Values[1][len(g.Sizes)-1] <= 0 {
			t.Errorf("--json %q = %+v, want 2 rounds", k, g)
		}
	}
}
