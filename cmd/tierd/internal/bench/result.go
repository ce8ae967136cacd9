package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is one case's measurements. Latencies are in microseconds, from
// an HDR histogram (1 us to 60 s, 3 significant digits).
type Result struct {
	Name  string
	Count int64
	P50   float64
	P99   float64
	P999  float64
	// MiBPerS is bytes moved per second: over the run's wall time for
	// replay cases, over the summed latencies for the others.
	MiBPerS float64
	// GetsPerMiB is GETs of remote objects per MiB read (replay only).
	GetsPerMiB *float64
	// PeakRSSMiB is the peak anonymous resident memory, PeakTotalRSSMiB
	// the peak resident memory with file-backed pages, LimitMiB the
	// target (memory case only).
	PeakRSSMiB, PeakTotalRSSMiB, LimitMiB *float64
	// CPUProcPerGiB is the bench process's CPU seconds (client and the
	// in-process server: tierd's, or the floor's) per GiB moved, and
	// CPUStorePerGiB the store process's (MinIO started by the bench;
	// nil for --s3-endpoint), from /proc/<pid>/stat (replay, grpc_floor
	// and raw_seq_get only).
	CPUProcPerGiB, CPUStorePerGiB *float64
	// WarmGets is the GETs tierd made while fetch_warm was timed
	// (fetch_warm only): 0 when every timed fetch was served from the
	// cache, as the case intends.
	WarmGets *float64
	// RoundMiBPerS and RoundCPUPerGiB are each round's MiB/s and CPU
	// seconds per GiB (the bench process plus the store, when known),
	// for the cases that run in rounds (replay, kafka_replay).
	RoundMiBPerS, RoundCPUPerGiB []float64
	// CPUByProc is the CPU seconds per GiB moved of each process a plugin
	// case involves: "jvm" (the plugin's, or the floor's, JVM), "tierd"
	// (the tierd run child) and "minio" (when the bench started it), from
	// /proc/<pid>/stat around every call; nil for the other cases.
	CPUByProc map[string]float64
	Note      string

	hist      *hdrhistogram.Histogram
	gets      float64 // GETs of .log objects tierd made, where counted
	indexGets float64 // GETs of index objects, where counted
	retries   int     // UNAVAILABLE answers asked again
	bytes     int64
	busy      time.Duration      // summed latencies
	wall      time.Duration      // set by cases that measure throughput
	cpuProc   float64            // CPU seconds of the bench process, where measured
	cpuStore  float64            // CPU seconds of the store, where measured; -1 unknown
	cpuBytes  int64              // bytes moved while the CPU above was measured
	cpuBy     map[string]float64 // CPU seconds by process (plugin cases), over all the bytes added
}

func newResult(name string) *Result {
	return &Result{Name: name, hist: hdrhistogram.New(1, 60_000_000, 3)}
}

func (r *Result) add(d time.Duration, bytes int64) {
	r.hist.RecordValue(max(d.Microseconds(), 1))
	r.bytes += bytes
	r.busy += d
}

// addCPUBy adds CPU seconds by process to the plugin cases' account.
func (r *Result) addCPUBy(c map[string]float64) {
	if r.cpuBy == nil {
		r.cpuBy = map[string]float64{}
	}
	for k, v := range c {
		r.cpuBy[k] += v
	}
}

func (r *Result) merge(o *Result) {
	if o.cpuBy != nil {
		r.addCPUBy(o.cpuBy)
	}
	r.retries += o.retries
	r.hist.Merge(o.hist)
	r.bytes += o.bytes
	r.busy += o.busy
}

// finish fills the summary fields from the histogram.
func (r *Result) finish() {
	r.Count = r.hist.TotalCount()
	r.P50 = float64(r.hist.ValueAtQuantile(50))
	r.P99 = float64(r.hist.ValueAtQuantile(99))
	r.P999 = float64(r.hist.ValueAtQuantile(99.9))
	d := r.busy
	if r.wall > 0 {
		d = r.wall
	}
	if d > 0 {
		r.MiBPerS = float64(r.bytes) / (1 << 20) / d.Seconds()
	}
	if len(r.cpuBy) > 0 && r.bytes > 0 {
		r.CPUByProc = map[string]float64{}
		for k, v := range r.cpuBy {
			r.CPUByProc[k] = v / (float64(r.bytes) / (1 << 30))
		}
	}
	if r.cpuBytes > 0 {
		gib := float64(r.cpuBytes) / (1 << 30)
		p := r.cpuProc / gib
		r.CPUProcPerGiB = &p
		if r.cpuStore >= 0 {
			st := r.cpuStore / gib
			r.CPUStorePerGiB = &st
		}
	}
}

// Report is a run's results in the order they were measured.
type Report struct {
	Results []*Result
	// Series are the growth cases' measures (readers_N, scale_partitions,
	// scale_segments) by size and round.
	Series []*Series
	// SegmentBytes and ChunkBytes are the run's sizes: the GETs-per-MiB
	// target holds for segments of many chunks.
	SegmentBytes, ChunkBytes int64
	// StoreLatency is the run's --store-latency: the fetch_cold target is
	// 1.05 from 20 ms on, 1.3 below.
	StoreLatency time.Duration
	// ObjectsStoreLatency is the latency of the objects case's second
	// cold-Fetch run (Config.ObjectsStoreLatency; 0 without one).
	ObjectsStoreLatency time.Duration
	// IdleInterval is the copier's pass interval the idle pass's CPU is
	// judged against (its default, 30 s).
	IdleInterval time.Duration
	// Rounds, Partitions, Copies and ReaderCounts are the run's settings.
	Rounds                           int
	Partitions, Copies, ReaderCounts []int
	// PrefetchBytes and ReaderBytes8 are the run's prefetch depth and
	// readers_N's bytes per reader at 8 readers (where bytes fetched per
	// byte served is judged), bytes: what a reader's prefetch may read
	// past its last Fetch, against what it reads.
	PrefetchBytes, ReaderBytes8 int64
	// PluginSkipped says why the plugin case did not run ("" when it ran
	// or was not selected).
	PluginSkipped string
	// FirstTouchCPUPerGiB is the CPU seconds per GiB this machine spends
	// on a process's first touch of memory (firstTouchProbe), nil when
	// not probed.
	FirstTouchCPUPerGiB *float64
}

func (rep *Report) get(name string) *Result {
	for _, r := range rep.Results {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// WriteTable prints the results and the targets as ratios.
func (rep *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(rep.Results) > 0 { // none when only growth cases ran
		fmt.Fprintln(tw, "case\tcount\tp50_us\tp99_us\tp99.9_us\tMiB/s\tGETs/MiB\tCPU-s/GiB proc+store\t")
	}
	for _, r := range rep.Results {
		g, c := "-", "-"
		if r.GetsPerMiB != nil {
			g = fmt.Sprintf("%.3f", *r.GetsPerMiB)
		}
		if r.CPUProcPerGiB != nil {
			c = fmt.Sprintf("%.2f+", *r.CPUProcPerGiB)
			if r.CPUStorePerGiB != nil {
				c += fmt.Sprintf("%.2f", *r.CPUStorePerGiB)
			} else {
				c += "?"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%s\t%s\t\n", r.Name, r.Count, r.P50, r.P99, r.P999, r.MiBPerS, g, c)
	}
	tw.Flush()
	writeGrowth(w, rep.Series)
	fmt.Fprintln(w)
	for _, r := range rep.Results {
		note := r.Note
		if r.retries > 0 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; %d UNAVAILABLE answers (remote.fetch.max.wait.ms) asked again", r.retries), "; ")
		}
		if note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Name, note)
		}
	}
	if rep.series("readers", "seq", "fetched_per_served") != nil && rep.ReaderBytes8 > 0 {
		ahead := min(rep.PrefetchBytes, rep.ReaderBytes8/8)
		fmt.Fprintf(w, "readers: fetched_per_served counts what was read ahead past each reader's last read too: a reader is read ahead by at most an eighth of what it has read and remote.fetch.prefetch.max.bytes, at 8 readers min(%d, %d / 8) / %d = %.3f per byte served here; unread_prefetch_per_served is what each run left so\n",
			rep.PrefetchBytes, rep.ReaderBytes8, rep.ReaderBytes8, float64(ahead)/float64(rep.ReaderBytes8))
	}
	fmt.Fprintln(w, "\ntargets (ratios from this run):")
	for _, t := range rep.Targets() {
		label := map[bool]string{true: "ok", false: "MISS"}[t.Met]
		if t.Info {
			label = "n/a"
		}
		if t.Note {
			label = "note"
		}
		fmt.Fprintf(w, "  %-4s %s\n", label, t.Text)
	}
	if lines := rep.Breakdown(); len(lines) > 0 {
		fmt.Fprintln(w, "\nwhere the time goes (this run):")
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// Breakdown separates tierd's own cost from the transport's: a cold fetch
// is a GET plus a gRPC response of the same bytes, and a replay moves
// every byte through both the store and the transport, which on a small
// machine share the same cores.
func (rep *Report) Breakdown() []string {
	var out []string
	cold, raw, floor := rep.get("fetch_cold"), rep.get("raw_get"), rep.get("grpc_floor")
	if cold != nil && raw != nil && floor != nil && raw.P50 > 0 {
		out = append(out, fmt.Sprintf("fetch_cold p50 %.0f us = raw_get %.0f + grpc_floor %.0f + tierd %.0f us; (fetch_cold - grpc_floor) / raw_get = %.2f",
			cold.P50, raw.P50, floor.P50, cold.P50-raw.P50-floor.P50, (cold.P50-floor.P50)/raw.P50))
	}
	replay, seq := rep.get("replay"), rep.get("raw_seq_get")
	if replay != nil && seq != nil && floor != nil && seq.MiBPerS > 0 && floor.MiBPerS > 0 {
		bound := 1 / (1/seq.MiBPerS + 1/floor.MiBPerS)
		out = append(out, fmt.Sprintf("replay with store and transport done one after the other could reach 1/(1/raw_seq_get + 1/grpc_floor) = %.0f MiB/s; replay reached %.0f (%.0f%%)",
			bound, replay.MiBPerS, 100*replay.MiBPerS/bound))
	}
	if replay != nil && len(replay.RoundCPUPerGiB) >= 2 && rep.FirstTouchCPUPerGiB != nil {
		out = append(out, fmt.Sprintf("first touch of memory on this machine costs %.2f CPU-s per GiB (page faults, probed); replay's first round used %.2f CPU-s/GiB, its median round %.2f",
			*rep.FirstTouchCPUPerGiB, replay.RoundCPUPerGiB[0], median(replay.RoundCPUPerGiB)))
	}
	return out
}

// Target is one of the read path's targets, checked on this run. Info
// marks one that does not apply to the run's sizes, Note a line that is
// no target but explains one (printed beside it).
type Target struct {
	Text string
	Met  bool
	Info bool
	Note bool
}

// Targets checks the targets that the run's results allow.
func (rep *Report) Targets() []Target {
	var out []Target
	ratio := func(a, b, limit float64, le bool, text string) {
		if b == 0 {
			return
		}
		x := math.Round(a/b*100) / 100 // judged as printed
		met := x <= limit
		if !le {
			met = x >= limit
		}
		out = append(out, Target{Text: fmt.Sprintf(text, x, limit), Met: met})
	}
	if c, r := rep.get("fetch_cold"), rep.get("raw_get"); c != nil && r != nil {
		if rep.StoreLatency >= 20*time.Millisecond {
			ratio(c.P50, r.P50, 1.05, true, "fetch_cold p50 / raw_get p50 = %.2f (<= %.2f with the store 20 ms or more away)")
		} else {
			ratio(c.P50, r.P50, 1.3, true, "fetch_cold p50 / raw_get p50 = %.2f (<= %.2f)")
		}
	}
	if c, r := rep.get("fetch_cold_stream"), rep.get("raw_get"); c != nil && r != nil && r.P50 > 0 {
		// No target of its own: the unary fetch_cold carries it. This is
		// the path tierd's client and the embedded log take.
		out = append(out, Target{Note: true, Text: fmt.Sprintf("fetch_cold_stream p50 / raw_get p50 = %.2f (FetchStream, as tierd's client reads: batches sent as the GET body arrives)",
			math.Round(c.P50/r.P50*100)/100)})
	}
	if w, f := rep.get("fetch_warm"), rep.get("grpc_floor"); w != nil && f != nil {
		n := len(out)
		ratio(w.P50, f.P50, 1.3, true, "fetch_warm p50 / grpc_floor p50 = %.2f (<= %.2f)")
		if w.WarmGets != nil && *w.WarmGets > 0 && len(out) > n {
			// Not a warm read: the ratio does not count.
			t := &out[len(out)-1]
			t.Text += fmt.Sprintf("; not judged: %.0f GETs while timed, so not every sample was cached", *w.WarmGets)
			t.Met = false
		}
	}
	// The replay targets are judged on replay's median round; the first
	// round of a process also pays for touching its memory for the first
	// time (the cache's buffers, the heap's growth), which the note and
	// the first-touch probe show.
	p, s, f := rep.get("replay"), rep.get("raw_seq_get"), rep.get("grpc_floor")
	if p != nil && s != nil && f != nil && s.MiBPerS > 0 && f.MiBPerS > 0 {
		bound := 1 / (1/s.MiBPerS + 1/f.MiBPerS)
		if v, text, ok := byRound(p.RoundMiBPerS, bound); ok {
			ratio(v, bound, 0.95, false, "replay MiB/s"+text+" / two-hop bound 1/(1/raw_seq_get + 1/grpc_floor) = %.2f (>= %.2f)")
		} else {
			ratio(p.MiBPerS, bound, 0.95, false, "replay MiB/s / two-hop bound 1/(1/raw_seq_get + 1/grpc_floor) = %.2f (>= %.2f)")
		}
	}
	pc, okP := cpuTotal(p)
	sc, okS := cpuTotal(s)
	fc, okF := cpuTotal(f)
	if okP && okS && okF {
		if v, text, ok := byRound(p.RoundCPUPerGiB, sc+fc); ok {
			ratio(v, sc+fc, 1.2, true, "replay CPU-s/GiB"+text+" / (raw_seq_get + grpc_floor) CPU-s/GiB = %.2f (<= %.2f)")
		} else {
			ratio(pc, sc+fc, 1.2, true, "replay CPU-s/GiB / (raw_seq_get + grpc_floor) CPU-s/GiB = %.2f (<= %.2f)")
		}
	}
	if s := rep.series("copy", "minio", "copy_over_raw_put"); s != nil {
		if t, ok := ratioTarget("copy MiB/s / raw_put MiB/s", s.at(0), 0.9, false, ""); ok {
			out = append(out, t)
		}
	}
	if p != nil && s != nil {
		if p.GetsPerMiB != nil {
			t := Target{Text: fmt.Sprintf("replay GETs per MiB = %.3f (<= 0.30 at 4 MiB chunks)", *p.GetsPerMiB), Met: *p.GetsPerMiB <= 0.3}
			if rep.ChunkBytes != 4<<20 || rep.SegmentBytes < 8*rep.ChunkBytes {
				// Each segment costs an index GET and a partial last chunk.
				t.Text += fmt.Sprintf("; the target is for 4 MiB chunks and segments of 8 or more (here %d-byte chunks, %d-byte segments)", rep.ChunkBytes, rep.SegmentBytes)
				t.Info = true
			}
			out = append(out, t)
		}
	}
	// The Kafka listener against the gRPC API, over the same fetch server.
	if k, c := rep.get("kafka_fetch_cold"), rep.get("fetch_cold"); k != nil && c != nil {
		ratio(k.P50, c.P50, 1.1, true, "kafka_fetch_cold p50 / fetch_cold p50 = %.2f (<= %.2f)")
	}
	if k, p := rep.get("kafka_replay"), rep.get("replay"); k != nil && p != nil {
		ratio(k.MiBPerS, p.MiBPerS, 0.9, false, "kafka_replay MiB/s / replay MiB/s = %.2f (>= %.2f)")
	}
	for _, r := range rep.Results {
		if r.PeakRSSMiB != nil {
			out = append(out, Target{Text: fmt.Sprintf("%s peak anonymous RSS %.0f MiB (<= cache budgets + 64 = %.0f MiB)", r.Name, *r.PeakRSSMiB, *r.LimitMiB), Met: *r.PeakRSSMiB <= *r.LimitMiB})
		}
	}
	out = append(out, rep.pluginTargets()...)
	out = append(out, rep.codecTargets()...)
	out = append(out, rep.objectsTargets()...)
	return append(out, rep.growthTargets()...)
}

type jsonCase struct {
	Count      int64    `json:"count"`
	P50        float64  `json:"p50_us"`
	P99        float64  `json:"p99_us"`
	P999       float64  `json:"p999_us"`
	MiBPerS    float64  `json:"mib_per_s"`
	GetsPerMiB *float64 `json:"gets_per_mib,omitempty"`
	PeakRSSMiB *float64 `json:"peak_anon_rss_mib,omitempty"`
	PeakTotal  *float64 `json:"peak_total_rss_mib,omitempty"`
	LimitMiB   *float64 `json:"limit_mib,omitempty"`
	CPUProc    *float64 `json:"cpu_s_per_gib_proc,omitempty"`
	CPUStore   *float64 `json:"cpu_s_per_gib_store,omitempty"`
	WarmGets   *float64 `json:"gets_while_timed,omitempty"`
	// RoundMiBPerS and RoundCPU are each round's MiB/s and CPU-s/GiB
	// (bench process plus store) for cases run in rounds.
	RoundMiBPerS []float64 `json:"mib_per_s_by_round,omitempty"`
	RoundCPU     []float64 `json:"cpu_s_per_gib_by_round,omitempty"`
	// CPUByProc is the plugin cases' CPU-s/GiB by process (jvm, tierd,
	// minio).
	CPUByProc map[string]float64 `json:"cpu_s_per_gib_by_process,omitempty"`
}

// jsonSeries is one growth measure: sizes, values[round][size] (null
// where not measured) and the reason a size has no value.
type jsonSeries struct {
	Sizes    []int        `json:"sizes"`
	Values   [][]*float64 `json:"values"`
	TimedOut []string     `json:"timed_out,omitempty"`
}

// WriteJSON writes an object keyed by case name; the growth measures are
// keyed "case/variant metric" (e.g. "scale_partitions/minio
// idle_pass_cpu_s").
func (rep *Report) WriteJSON(path string) error {
	m := map[string]any{}
	for _, r := range rep.Results {
		m[r.Name] = jsonCase{r.Count, r.P50, r.P99, r.P999, r.MiBPerS, r.GetsPerMiB, r.PeakRSSMiB, r.PeakTotalRSSMiB, r.LimitMiB, r.CPUProcPerGiB, r.CPUStorePerGiB, r.WarmGets, r.RoundMiBPerS, r.RoundCPUPerGiB, r.CPUByProc}
	}
	for _, s := range rep.Series {
		js := jsonSeries{Sizes: s.Sizes}
		for _, row := range s.Values {
			var vs []*float64
			for _, v := range row {
				if math.IsNaN(v) {
					vs = append(vs, nil)
				} else {
					v := v
					vs = append(vs, &v)
				}
			}
			js.Values = append(js.Values, vs)
		}
		for _, t := range s.TimedOut {
			if t != "" {
				js.TimedOut = s.TimedOut
			}
		}
		m[s.Name()] = js
	}
	if rep.PluginSkipped != "" {
		m["plugin_skipped"] = rep.PluginSkipped
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// byRound returns the median of a case's per-round values, for a target
// judged on it, with the text naming it, the rounds' range and the first
// round against base; ok false with fewer than two rounds.
func byRound(vs []float64, base float64) (v float64, text string, ok bool) {
	if len(vs) < 2 || base <= 0 {
		return 0, "", false
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	v = median(vs)
	return v, fmt.Sprintf(" (median of %d rounds; by round %.2f-%.2f of the base, the first %.2f)",
		len(vs), lo/base, hi/base, vs[0]/base), true
}
