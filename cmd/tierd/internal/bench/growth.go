package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Series is one measure of a growth case at each size, every round: for
// example the CPU seconds of scale_partitions' idle pass on the
// filesystem bucket at 100, 1,000 and 10,000 partitions.
type Series struct {
	// Case is the case's name (scale_partitions, scale_segments, readers).
	Case string
	// Variant tells runs of one case apart: the bucket (filesystem,
	// minio) or the readers' pattern (seq, random, broker).
	Variant string
	// Metric names the measure, with its unit last (first_pass_cpu_s).
	Metric string
	// Sizes are the sizes measured (partitions, copies, readers; the
	// objects case's chunk KiB, 0 for plain), rising.
	Sizes []int
	// SizeUnit is what Sizes count, printed after each ("KiB chunks");
	// "" for the growth cases, whose case names say it.
	SizeUnit string `json:",omitempty"`
	// Values holds Values[round][i] for Sizes[i]; NaN where the size was
	// not measured that round (it timed out, or a smaller size did).
	Values [][]float64
	// Growth marks a measure whose growth per tenfold has a target
	// (<= 12x).
	Growth bool
	// TimedOut says, per size, why it has no value ("timed out after
	// 10m0s"); "" where it has.
	TimedOut []string
}

func newSeries(c, variant, metric string, sizes []int, rounds int, growth bool) *Series {
	s := &Series{Case: c, Variant: variant, Metric: metric, Sizes: sizes, Growth: growth, TimedOut: make([]string, len(sizes))}
	for range rounds {
		row := make([]float64, len(sizes))
		for i := range row {
			row[i] = math.NaN()
		}
		s.Values = append(s.Values, row)
	}
	return s
}

// set records v for round r at size index i.
func (s *Series) set(r, i int, v float64) { s.Values[r][i] = v }

// tenfold reports whether the table shows growth per tenfold: for the
// scale cases, whose sizes go up tenfold (readers_N's do not).
func (s *Series) tenfold() bool { return strings.HasPrefix(s.Case, "scale_") }

// Name is "case/variant metric".
func (s *Series) Name() string { return s.Case + "/" + s.Variant + " " + s.Metric }

// at returns the measure at size index i over the rounds that have it.
func (s *Series) at(i int) []float64 {
	var out []float64
	for _, row := range s.Values {
		if !math.IsNaN(row[i]) {
			out = append(out, row[i])
		}
	}
	return out
}

// GrowthPerTenfold returns, for each step between neighbouring sizes i-1
// and i (index i, from 1), the factor by which the measure grew,
// scaled to a tenfold step (factor^(1/log10(size ratio))), one per round
// that measured both sizes. A step from a value of 0 has no factor.
func (s *Series) GrowthPerTenfold(i int) []float64 {
	var out []float64
	steps := math.Log10(float64(s.Sizes[i]) / float64(s.Sizes[i-1]))
	for _, row := range s.Values {
		a, b := row[i-1], row[i]
		if math.IsNaN(a) || math.IsNaN(b) || a <= 0 || steps <= 0 {
			continue
		}
		out = append(out, math.Pow(b/a, 1/steps))
	}
	return out
}

// spread is a set of values from several rounds: its median and range.
type spread struct{ med, lo, hi float64 }

func spreadOf(vs []float64) (spread, bool) {
	if len(vs) == 0 {
		return spread{}, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{m, s[0], s[len(s)-1]}, true
}

func (sp spread) String() string {
	if sp.lo == sp.hi {
		return fmtNum(sp.med)
	}
	return fmt.Sprintf("%s (%s-%s)", fmtNum(sp.med), fmtNum(sp.lo), fmtNum(sp.hi))
}

// fmtNum prints a measure with 3 significant digits, whole numbers whole.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case v == math.Trunc(v) && a < 1e7:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// writeGrowth prints every series: the median (and range over rounds)
// at each size, then the growth per tenfold of each step.
func writeGrowth(w io.Writer, series []*Series) {
	if len(series) == 0 {
		return
	}
	fmt.Fprintln(w, "\nseries (median over rounds, range over rounds in brackets; x10 = growth per tenfold of the size, in the scale cases):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	last := ""
	for _, s := range series {
		if head := s.Case + "/" + s.Variant + " " + fmt.Sprint(s.Sizes); head != last {
			last = head
			cols := []string{s.Case + "/" + s.Variant}
			for _, n := range s.Sizes {
				switch {
				case s.SizeUnit == "":
					cols = append(cols, fmt.Sprintf("at %d", n))
				case n == 0:
					cols = append(cols, "as it came")
				default:
					cols = append(cols, fmt.Sprintf("%d %s", n, s.SizeUnit))
				}
			}
			for i := 1; i < len(s.Sizes) && s.tenfold(); i++ {
				cols = append(cols, fmt.Sprintf("x10 %d->%d", s.Sizes[i-1], s.Sizes[i]))
			}
			fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
		}
		cols := []string{"  " + s.Metric}
		for i := range s.Sizes {
			if sp, ok := spreadOf(s.at(i)); ok {
				cols = append(cols, sp.String())
			} else if s.TimedOut[i] != "" {
				cols = append(cols, s.TimedOut[i])
			} else {
				cols = append(cols, "-")
			}
		}
		for i := 1; i < len(s.Sizes) && s.tenfold(); i++ {
			if sp, ok := spreadOf(s.GrowthPerTenfold(i)); ok {
				cols = append(cols, sp.String()+"x")
			} else {
				cols = append(cols, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
}

// timedOut is the note a size gets when its step did not finish in the
// case timeout.
func timedOut(d time.Duration) string { return "timed out after " + d.String() }
