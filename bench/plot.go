package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// nines maps a percentile to the plot's x axis: 0 at p0, 1 at p90, 2 at
// p99, 3 at p99.9 (the usual HDR-histogram layout).
func nines(q float64) float64 { return -math.Log10(1 - q/100) }

type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, p := range []struct {
		q     float64
		label string
	}{{1, "1%"}, {50, "50%"}, {90, "90%"}, {99, "99%"}, {99.9, "99.9%"}, {99.99, "99.99%"}} {
		if x := nines(p.q); x >= min && x <= max {
			ts = append(ts, plot.Tick{Value: x, Label: p.label})
		}
	}
	return ts
}

// WritePlot draws each latency case's percentile curve (log latency over
// percentiles) to path; the format follows its extension, .png or .svg.
func (rep *Report) WritePlot(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("bench: plot %s: the file name must end in .png or .svg", path)
	}
	p := plot.New()
	p.Title.Text = "tierd remote-read latency by percentile"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (us, log scale)"
	p.X.Tick.Marker = ninesTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Y.Min = 1 // room for the legend (11 cases) below the curves
	p.Legend.Top = false
	p.Legend.Left = false
	palette := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {23, 190, 207, 255},
		{188, 189, 34, 255}, {0, 0, 0, 255}}
	for i, r := range rep.Results {
		if r.hist == nil || r.hist.TotalCount() < 2 {
			continue
		}
		var pts plotter.XYs
		// From the first percentile that holds a whole sample (below it the
		// histogram answers 0).
		lowest := 100 / float64(r.hist.TotalCount())
		for _, q := range []float64{1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97, 99, 99.5, 99.9} {
			q = max(q, lowest)
			pts = append(pts, plotter.XY{X: nines(q), Y: float64(max(r.hist.ValueAtQuantile(q), 1))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", r.Name, r.hist.TotalCount()), l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// GrowthPlotPath is where WriteGrowthPlot draws when the latency plot
// goes to path: "docs/bench.png" gives "docs/bench-growth.png".
func GrowthPlotPath(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-growth" + ext
}

// WriteGrowthPlot draws the growth cases' measures that have a growth
// target (pass CPU seconds, retention, "tierd segments") and the Fetch
// p50s of scale_segments against size, both axes log scale, one line per
// measure and bucket (medians over the rounds), each with a dashed line
// of linear growth (x10 per tenfold) from its first point. The format follows the extension, .png or .svg.
// It draws nothing and returns nil when the run had no growth case.
func (rep *Report) WriteGrowthPlot(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("bench: plot %s: the file name must end in .png or .svg", path)
	}
	var lines []*Series
	for _, s := range rep.Series {
		if s.Growth || strings.HasPrefix(s.Metric, "fetch_") {
			lines = append(lines, s)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "tierd cost by size (median over rounds; dashed: linear)"
	p.X.Label.Text = "size (partitions or finished copies, log scale)"
	p.Y.Label.Text = "seconds, or ms for fetch_* (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	palette := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {23, 190, 207, 255},
		{188, 189, 34, 255}, {0, 0, 0, 255}}
	for k, s := range lines {
		var pts plotter.XYs
		for i, n := range s.Sizes {
			if sp, ok := spreadOf(s.at(i)); ok && sp.med > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: sp.med})
			}
		}
		if len(pts) < 2 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[k%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name(), l)
		lin := plotter.XYs{pts[0], {X: pts[len(pts)-1].X, Y: pts[0].Y * pts[len(pts)-1].X / pts[0].X}}
		ll, err := plotter.NewLine(lin)
		if err != nil {
			return err
		}
		ll.Color, ll.Dashes, ll.Width = l.Color, []vg.Length{vg.Points(3), vg.Points(3)}, vg.Points(0.75)
		p.Add(ll)
	}
	return p.Save(10*vg.Inch, 7*vg.Inch, path)
}
