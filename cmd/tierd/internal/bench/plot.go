package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
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
// It draws nothing and returns nil when the run had no latency case
// (only growth cases).
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
	drawn := 0
	for _, r := range rep.Results {
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
		// Past the palette's colours, the curves repeat them dashed, so
		// that no two curves look alike.
		l.Color = palette[drawn%len(palette)]
		l.Width = vg.Points(1.5)
		if drawn >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", r.Name, r.hist.TotalCount()), l)
		drawn++
	}
	if drawn == 0 {
		return nil
	}
	// The legend goes below the curves, one line a case: past the eleven
	// cases that fit under curves from 1 us, the plot grows taller and its
	// axis starts lower (the plugin cases make nineteen).
	height := 5 * vg.Inch
	if drawn > 11 {
		height = 8 * vg.Inch
		p.Y.Min = 0.01
	}
	return p.Save(8*vg.Inch, height, path)
}

// GrowthPlotPath is where WriteGrowthPlot draws when the latency plot
// goes to path: "docs/bench.png" gives "docs/bench-growth.png".
func GrowthPlotPath(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-growth" + ext
}

// WriteGrowthPlot draws the scale cases' measures that have a growth
// target (pass CPU seconds, retention, "tierd segments") and the Fetch
// p50s of scale_segments against size, both axes log scale, in two
// panels (scale_partitions, scale_segments): one colour per measure,
// solid on the filesystem bucket and dashed on MinIO (medians over the
// rounds), each with a thin grey line of linear growth (x10 per
// tenfold) from its first point. The format follows the extension, .png
// or .svg. It draws nothing and returns nil when the run had no scale
// case.
func (rep *Report) WriteGrowthPlot(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("bench: plot %s: the file name must end in .png or .svg", path)
	}
	var plots []*plot.Plot
	for _, c := range []struct{ name, x string }{{"scale_partitions", "partitions"}, {"scale_segments", "finished copies in one partition"}} {
		p, err := rep.growthPanel(c.name, c.x)
		if err != nil {
			return err
		}
		if p != nil {
			plots = append(plots, p)
		}
	}
	if len(plots) == 0 {
		return nil
	}
	w, h := vg.Length(len(plots))*6*vg.Inch, 6*vg.Inch
	var cv interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if ext == ".svg" {
		cv = vgsvg.New(w, h)
	} else {
		cv = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	dc := draw.New(cv)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	for i, c := range plot.Align([][]*plot.Plot{plots}, tiles, dc)[0] {
		plots[i].Draw(c)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := cv.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// growthPanel is one case's panel of the growth plot, or nil when the
// run did not measure that case.
func (rep *Report) growthPanel(name, xLabel string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = name + " (solid: filesystem, dashed: MinIO, grey: linear)"
	p.X.Label.Text = xLabel + " (log scale)"
	p.Y.Label.Text = "seconds; ms for fetch_* (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	// Dashes mark MinIO here, so every metric needs a colour of its own:
	// twelve, more than any case has metrics.
	palette := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {23, 190, 207, 255},
		{188, 189, 34, 255}, {0, 0, 0, 255}, {128, 0, 0, 255}, {0, 0, 128, 255}}
	colours := map[string]color.RGBA{}
	drawn := 0
	for _, s := range rep.Series {
		if s.Case != name || !(s.Growth || strings.HasPrefix(s.Metric, "fetch_")) {
			continue
		}
		var pts plotter.XYs
		for i, n := range s.Sizes {
			if sp, ok := spreadOf(s.at(i)); ok && sp.med > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: sp.med})
			}
		}
		if len(pts) < 2 {
			continue
		}
		col, ok := colours[s.Metric]
		if !ok {
			col = palette[len(colours)%len(palette)]
			colours[s.Metric] = col
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = col, vg.Points(1.5)
		if s.Variant != "filesystem" {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		lin := plotter.XYs{pts[0], {X: pts[len(pts)-1].X, Y: pts[0].Y * pts[len(pts)-1].X / pts[0].X}}
		ll, err := plotter.NewLine(lin)
		if err != nil {
			return nil, err
		}
		ll.Color, ll.Width = color.RGBA{160, 160, 160, 255}, vg.Points(0.5)
		p.Add(ll, l)
		p.Legend.Add(s.Variant+" "+s.Metric, l)
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	return p, nil
}
