package bench

import (
	"fmt"
	"math"
	"strings"
)

// This file holds the targets for cost that grows with the
// amount of work, and for CPU per byte: ratios within one run, each with
// its spread over the rounds.

// ratioTarget judges one ratio measured in each round: met when the
// median is within limit (at most, or at least when le is false). A
// non-empty scaled notes that the run's sizes are not the ones the
// target is stated for (it is judged all the same).
func ratioTarget(text string, vals []float64, limit float64, le bool, scaled string) (Target, bool) {
	sp, ok := spreadOf(vals)
	if !ok {
		return Target{}, false
	}
	met := sp.med <= limit
	op := "<="
	if !le {
		met, op = sp.med >= limit, ">="
	}
	t := Target{Text: fmt.Sprintf("%s = %s (%s %s)", text, fmtNum(sp.med), op, fmtNum(limit)), Met: met}
	if len(vals) > 1 {
		t.Text += fmt.Sprintf("; over %d rounds %s-%s", len(vals), fmtNum(sp.lo), fmtNum(sp.hi))
	}
	if scaled != "" {
		t.Text += "; the target is stated " + scaled
	}
	return t, true
}

// series returns the series named, or nil.
func (rep *Report) series(c, variant, metric string) *Series {
	for _, s := range rep.Series {
		if s.Case == c && s.Variant == variant && s.Metric == metric {
			return s
		}
	}
	return nil
}

// perRound returns f(row) for every round whose row has both sizes i
// and j of s (j may be i), and of t when not nil.
func perRound(s *Series, i, j int, f func(a, b float64) float64) []float64 {
	var out []float64
	for _, row := range s.Values {
		if !math.IsNaN(row[i]) && !math.IsNaN(row[j]) {
			out = append(out, f(row[i], row[j]))
		}
	}
	return out
}

// nearestSize returns the index of the size nearest n (the smaller of
// two as near).
func nearestSize(sizes []int, n int) int {
	best := 0
	for i, v := range sizes {
		if abs(v-n) < abs(sizes[best]-n) {
			best = i
		}
	}
	return best
}

func abs(x int) int { return max(x, -x) }

func indexOf(sizes []int, n int) int {
	for i, v := range sizes {
		if v == n {
			return i
		}
	}
	return -1
}

// growthTargets checks the growth cases' targets.
func (rep *Report) growthTargets() []Target {
	var out []Target
	add := func(t Target, ok bool) {
		if ok {
			out = append(out, t)
		}
	}
	for _, s := range rep.Series {
		if !s.Growth {
			continue
		}
		worst, worstAt := []float64(nil), 0
		for i := 1; i < len(s.Sizes); i++ {
			g := s.GrowthPerTenfold(i)
			a, okA := spreadOf(g)
			b, okB := spreadOf(worst)
			if okA && (!okB || a.med > b.med) {
				worst, worstAt = g, i
			}
		}
		if worst != nil {
			add(ratioTarget(fmt.Sprintf("%s growth per tenfold, %d -> %d", s.Name(), s.Sizes[worstAt-1], s.Sizes[worstAt]), worst, 12, true, ""))
		}
		for i, to := range s.TimedOut {
			if to != "" {
				out = append(out, Target{Text: fmt.Sprintf("%s at %d: %s (growth <= 12x per tenfold)", s.Name(), s.Sizes[i], to)})
				break
			}
		}
	}
	for _, kind := range []string{"filesystem", "minio"} {
		if s := rep.series("scale_partitions", kind, "idle_pass_cpu_s"); s != nil && len(s.Sizes) > 0 {
			i := len(s.Sizes) - 1
			n := s.Sizes[i]
			iv := rep.IdleInterval.Seconds()
			add(ratioTarget(fmt.Sprintf("%s idle pass CPU at %d partitions / interval (%s)", s.Case+"/"+kind, n, rep.IdleInterval),
				perRound(s, i, i, func(a, _ float64) float64 { return a / iv }), 0.05, true, unless(n == 10000, "at 10000 partitions")))
		}
		for _, m := range []string{"idle_pass_bucket_requests", "idle_pass_synced_writes"} {
			if s := rep.series("scale_partitions", kind, m); s != nil && len(s.Sizes) > 0 {
				i := len(s.Sizes) - 1
				add(ratioTarget(fmt.Sprintf("scale_partitions/%s %s at %d partitions", kind, m, s.Sizes[i]), s.at(i), 0, true, ""))
			}
		}
		c, a := rep.series("scale_segments", kind, "fetch_cached_p50_ms"), rep.series("scale_segments", kind, "fetch_after_write_p50_ms")
		if c != nil && a != nil && len(c.Sizes) > 0 {
			i := len(c.Sizes) - 1
			var vals []float64
			for r := range c.Values {
				if x, y := c.Values[r][i], a.Values[r][i]; !math.IsNaN(x) && !math.IsNaN(y) && x > 0 {
					vals = append(vals, y/x)
				}
			}
			add(ratioTarget(fmt.Sprintf("scale_segments/%s Fetch p50 after a metadata write / cached at %d copies", kind, c.Sizes[i]), vals, 2, true, unless(c.Sizes[i] == 100000, "at 100000 copies")))
		}
	}
	// Bytes fetched per byte served, <= 1.2 with 8 concurrent readers:
	// judged at 8 (or, at other sizes, the size nearest it), for tierd's
	// own sequential readers and for broker readers (byte ranges, as the
	// RSM plugin reads), with the other sizes as notes.
	for _, p := range []string{"seq", "broker"} {
		s := rep.series("readers", p, "fetched_per_served")
		if s == nil || len(s.Sizes) == 0 {
			continue
		}
		at := nearestSize(s.Sizes, 8)
		add(ratioTarget(fmt.Sprintf("readers %s, %d readers: bytes fetched / bytes served", p, s.Sizes[at]), s.at(at), 1.2, true, unless(s.Sizes[at] == 8, "at 8 readers")))
		for i, n := range s.Sizes {
			if t, ok := ratioTarget(fmt.Sprintf("readers %s, %d readers: bytes fetched / bytes served", p, n), s.at(i), 1.2, true, ""); ok && i != at {
				t.Note = true
				out = append(out, t)
			}
		}
	}
	for _, p := range []string{"seq", "random"} {
		if s := rep.series("readers", p, "mib_per_s"); s != nil && len(s.Sizes) > 1 {
			last := len(s.Sizes) - 1
			var vals []float64
			for _, row := range s.Values {
				best := math.Inf(-1)
				for _, v := range row {
					if !math.IsNaN(v) {
						best = max(best, v)
					}
				}
				if !math.IsNaN(row[last]) && best > 0 {
					vals = append(vals, row[last]/best)
				}
			}
			add(ratioTarget(fmt.Sprintf("readers %s: MiB/s at %d readers / best N", p, s.Sizes[last]), vals, 0.9, false, unless(s.Sizes[last] == 64, "at 64 readers")))
		}
		if s := rep.series("readers", p, "p99_ms"); s != nil && len(s.Sizes) > 1 && s.Sizes[0] == 1 {
			last := len(s.Sizes) - 1
			add(ratioTarget(fmt.Sprintf("readers %s: p99 at %d readers / p99 at 1", p, s.Sizes[last]),
				perRound(s, last, 0, func(a, b float64) float64 { return a / b }), 4, true, unless(s.Sizes[last] == 64, "at 64 readers")))
			out = append(out, rep.readersLatencyNotes(p)...)
		}
	}
	return out
}

// readersLatencyNotes puts the p99 target of readers_N in context, from
// the same run (medians over the rounds), as two lines that are not
// targets. Little's law: N closed-loop readers, each with one Fetch
// outstanding, make N = throughput x mean latency, so with the same bytes
// per Fetch the mean latency at N readers over that at 1 is
// N x (MiB/s at 1) / (MiB/s at N); the p99 ratio can beat that only if
// the tail narrows. Tail fairness: p99/p50 at N against at 1.
func (rep *Report) readersLatencyNotes(p string) []Target {
	mib, mean := rep.series("readers", p, "mib_per_s"), rep.series("readers", p, "mean_ms")
	p50, p99 := rep.series("readers", p, "p50_ms"), rep.series("readers", p, "p99_ms")
	if mib == nil || mean == nil || p50 == nil || p99 == nil || len(mib.Sizes) < 2 || mib.Sizes[0] != 1 {
		return nil
	}
	last := len(mib.Sizes) - 1
	n := float64(mib.Sizes[last])
	med := func(s *Series, i int) float64 { sp, _ := spreadOf(s.at(i)); return sp.med }
	var out []Target
	if t1, tn := med(mib, 0), med(mib, last); t1 > 0 && tn > 0 {
		out = append(out, Target{Note: true, Text: fmt.Sprintf("readers %s: Little's law from this run's MiB/s: mean latency at %d readers / at 1 = %d x %s / %s = %s (measured %s); p99 <= 4x needs MiB/s at %d >= %s x MiB/s at 1 unless the tail narrows",
			p, mib.Sizes[last], mib.Sizes[last], fmtNum(t1), fmtNum(tn), fmtNum(n*t1/tn), fmtNum(med(mean, last)/med(mean, 0)), mib.Sizes[last], fmtNum(n/4))})
	}
	if a, b := med(p50, 0), med(p50, last); a > 0 && b > 0 {
		out = append(out, Target{Note: true, Text: fmt.Sprintf("readers %s: tail fairness: p99/p50 at %d readers = %s, at 1 = %s",
			p, mib.Sizes[last], fmtNum(med(p99, last)/b), fmtNum(med(p99, 0)/a))})
	}
	return out
}

// cpuTotal is a result's CPU-s per GiB, the bench process's and the
// store's together (the store's left out when unknown).
func cpuTotal(r *Result) (float64, bool) {
	if r == nil || r.CPUProcPerGiB == nil {
		return 0, false
	}
	v := *r.CPUProcPerGiB
	if r.CPUStorePerGiB != nil {
		v += *r.CPUStorePerGiB
	}
	return v, true
}

// unless returns note when cond is false, "" when it holds.
func unless(cond bool, note string) string {
	if cond {
		return ""
	}
	return note
}

// pluginTargets checks the plugin case's targets, each a ratio per round
// of the same run (the floors are the JVM's own requests to the store):
// cold fetchLogSegment >= 0.9x the raw GET's MiB/s, warm >= 2x, copy >=
// 0.9x the raw PUT's, and bytes fetched <= 1.2x the bytes served with 8
// broker readers; with notes on the p50s and on how the readers' cost
// grows with N.
func (rep *Report) pluginTargets() []Target {
	if rep.PluginSkipped != "" {
		return []Target{{Info: true, Text: "plugin cases skipped: " + rep.PluginSkipped}}
	}
	var out []Target
	add := func(t Target, ok bool) {
		if ok {
			out = append(out, t)
		}
	}
	for _, c := range []struct {
		variant, metric, text string
		limit                 float64
	}{
		{"fetch", "cold_over_raw_get", "plugin_fetch_cold MiB/s / jvm_raw_get MiB/s", 0.9},
		{"fetch", "warm_over_raw_get", "plugin_fetch_warm MiB/s / jvm_raw_get MiB/s", 2},
		{"copy", "copy_over_raw_put", "plugin_copy MiB/s / jvm_raw_put MiB/s", 0.9},
	} {
		if s := rep.series("plugin", c.variant, c.metric); s != nil {
			add(ratioTarget(c.text, s.at(0), c.limit, false, ""))
		}
	}
	raw := rep.get("jvm_raw_get")
	for _, name := range []string{"plugin_fetch_cold", "plugin_fetch_warm"} {
		if r := rep.get(name); r != nil && raw != nil && raw.P50 > 0 {
			out = append(out, Target{Note: true, Text: fmt.Sprintf("%s p50 / jvm_raw_get p50 = %s (%.0f / %.0f us)", name, fmtNum(r.P50/raw.P50), r.P50, raw.P50)})
		}
	}
	if s := rep.series("plugin_readers", "broker", "fetched_per_served"); s != nil && len(s.Sizes) > 0 {
		at := nearestSize(s.Sizes, 8)
		add(ratioTarget(fmt.Sprintf("plugin_readers, %d readers: bytes fetched / bytes served", s.Sizes[at]), s.at(at), 1.2, true, unless(s.Sizes[at] == 8, "at 8 readers")))
	}
	// How the readers' cost grows from the fewest to the most readers.
	if s := rep.series("plugin_readers", "broker", "mib_per_s"); s != nil && len(s.Sizes) > 1 {
		last := len(s.Sizes) - 1
		med := func(metric string, i int) (float64, bool) {
			m := rep.series("plugin_readers", "broker", metric)
			if m == nil {
				return 0, false
			}
			sp, ok := spreadOf(m.at(i))
			return sp.med, ok
		}
		var parts []string
		for _, m := range []string{"mib_per_s", "p50_ms", "jvm_cpu_s_per_gib", "tierd_cpu_s_per_gib", "store_cpu_s_per_gib", "answered_per_served"} {
			a, okA := med(m, 0)
			b, okB := med(m, last)
			if okA && okB && a > 0 {
				parts = append(parts, fmt.Sprintf("%s %s -> %s (x%s)", m, fmtNum(a), fmtNum(b), fmtNum(b/a)))
			}
		}
		if len(parts) > 0 {
			out = append(out, Target{Note: true, Text: fmt.Sprintf("plugin_readers from %d to %d readers (medians): %s", s.Sizes[0], s.Sizes[last], strings.Join(parts, "; "))})
		}
	}
	return out
}
