package main

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The sweep plot's size and resolution, and the margin left around it.
const (
	plotWidth, plotHeight = 8 * vg.Inch, 5 * vg.Inch
	plotDPI               = 110
	plotMargin            = 10 * vg.Millimeter / 2
)

// plotSweep draws the steady-state images/s against the sweep's first setting, one line
// per combination of the others, and writes it as a PNG. The title takes two lines (what
// is plotted; the dataset, shortened, and recipe), the legend stands right of the axes,
// where it covers neither points nor ticks, and a point's value is written above it, or
// below where it would cover another's, or left out (the table has every figure).
func plotSweep(path string, res *benchResult) error {
	x := res.Sweep[0]
	p := plot.New()
	p.Title.Text = plotTitle(res)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = x
	p.Y.Label.Text = "images/s"
	p.Add(plotter.NewGrid())

	// Group runs into lines by the other swept settings, in the order they ran.
	var keys []string
	lines := map[string]plotter.XYs{}
	for _, r := range res.Runs {
		var parts []string
		for _, s := range res.Sweep[1:] {
			parts = append(parts, fmt.Sprintf("%s=%d", s, setting(r.Settings, s)))
		}
		k := strings.Join(parts, " ")
		if _, ok := lines[k]; !ok {
			keys = append(keys, k)
		}
		lines[k] = append(lines[k], plotter.XY{X: float64(setting(r.Settings, x)), Y: r.SteadyImagesPerS})
	}
	var ticks []plot.Tick
	for _, r := range res.Runs {
		v := float64(setting(r.Settings, x))
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == v }) {
			ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprint(setting(r.Settings, x))})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	// Room around the points, and above the highest for its value.
	lo, hi, top := ticks[0].Value, ticks[0].Value, 0.0
	for _, t := range ticks {
		lo, hi = min(lo, t.Value), max(hi, t.Value)
	}
	for _, r := range res.Runs {
		top = max(top, r.SteadyImagesPerS)
	}
	pad := max(0.5, 0.08*(hi-lo))
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.Y.Min, p.Y.Max = 0, 1.15*max(top, 1)
	p.Y.Tick.Marker = wholeTicks{}

	legend := plot.NewLegend()
	legend.Left, legend.Top = true, true
	var labels []pointLabel
	for i, k := range keys {
		l, pts, err := plotter.NewLinePoints(lines[k])
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		c := palette[i%len(palette)]
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		p.Add(l, pts)
		if k != "" {
			legend.Add(k, l, pts)
		}
		for _, xy := range lines[k] {
			labels = append(labels, pointLabel{xy: xy, color: c})
		}
	}

	img := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	dc = draw.Crop(dc, plotMargin, -plotMargin, plotMargin, -plotMargin)
	var legendWidth vg.Length
	if len(keys) > 1 || keys[0] != "" {
		legendWidth = legend.Rectangle(dc).Size().X + vg.Points(14)
	}
	pc := draw.Crop(dc, 0, -legendWidth, 0, 0)
	da := p.DataCanvas(pc)
	if _, err := placeLabels(p, da, labels); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p.Draw(pc)
	if legendWidth > 0 {
		// Beside the data area, level with its top.
		legend.Draw(draw.Crop(dc, dc.Size().X-legendWidth+vg.Points(10), 0, 0, da.Max.Y-dc.Max.Y))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	return nil
}

// plotTitle is the sweep plot's title: what is plotted, then the dataset (shortened to
// fit the width) and recipe.
func plotTitle(res *benchResult) string {
	return fmt.Sprintf("conveyor bench: images/s (steady state) against %s\n%s, %s recipe", res.Sweep[0], shorten(res.Dataset, 70), res.Recipe)
}

// shorten keeps s to n characters at most, cutting its middle: "s3://bucket/…/train".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := n / 3
	return string(r[:head]) + "…" + string(r[len(r)-(n-head-1):])
}

// pointLabel is a point's value, written near it in its line's colour.
type pointLabel struct {
	xy    plotter.XY
	color color.Color
}

// placeLabels adds each point's value to p: above the point, or below it where above
// would overlap a point or a label already placed at the same x, or not at all where
// both would.
// Points are labelled from the highest down; da is the data area p will draw into.
func placeLabels(p *plot.Plot, da draw.Canvas, labels []pointLabel) ([]labelSpan, error) {
	slices.SortStableFunc(labels, func(a, b pointLabel) int { return cmp.Compare(b.xy.Y, a.xy.Y) })
	ts := p.Y.Tick.Label // a text style in the plot's theme
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YBottom
	h := ts.Height("0") + vg.Points(2)
	gap := vg.Points(4)
	type span = labelSpan
	var placed []span
	overlaps := func(s span) bool { return slices.ContainsFunc(placed, s.overlaps) }
	// yAt is a point's height on the canvas, as p will draw it.
	yAt := func(y float64) vg.Length {
		return da.Min.Y + vg.Length((y-p.Y.Min)/(p.Y.Max-p.Y.Min))*da.Size().Y
	}
	for _, l := range labels { // the points themselves, which no label may cover
		r := vg.Points(4)
		placed = append(placed, span{vg.Length(l.xy.X), yAt(l.xy.Y) - r, yAt(l.xy.Y) + r})
	}
	points := len(placed)
	for _, l := range labels {
		x, y := vg.Length(l.xy.X), yAt(l.xy.Y)
		above := span{x, y + gap, y + gap + h}
		below := span{x, y - gap - h, y - gap}
		var off vg.Length
		switch {
		case !overlaps(above):
			placed, off = append(placed, above), gap
		case !overlaps(below) && below.lo > da.Min.Y:
			placed, off = append(placed, below), -gap-h+vg.Points(2)
		default:
			continue
		}
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{l.xy}, Labels: []string{fmt.Sprintf("%.0f", l.xy.Y)}})
		if err != nil {
			return nil, err
		}
		lab.TextStyle[0] = ts
		lab.TextStyle[0].Color = l.color
		lab.Offset = vg.Point{Y: off}
		p.Add(lab)
	}
	return placed[points:], nil
}

// labelSpan is the height a label (or a point) takes on the canvas, lo to hi, at x in
// data units.
type labelSpan struct{ x, lo, hi vg.Length }

func (s labelSpan) overlaps(o labelSpan) bool { return o.x == s.x && s.lo < o.hi && o.lo < s.hi }

// wholeTicks are the default ticks labelled as whole numbers ("250", not "250.00"),
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
}

// setting is the value of a swept setting in a run.
func setting(s settings, name string) int {
	switch name {
	case "workers":
		return s.Workers
	case "prefetch":
		return s.Prefetch
	}
	return s.Batch
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
}
