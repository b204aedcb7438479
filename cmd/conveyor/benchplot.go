package main

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotSweep draws images/s against the sweep's first setting, one line per combination of
// the others, and writes it as a PNG.
func plotSweep(path string, res *benchResult) error {
	x := res.Sweep[0]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("conveyor bench: %s, %s recipe", res.Dataset, res.Recipe)
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
	// Room around the points, and above them for the legend.
	lo, hi, top := ticks[0].Value, ticks[0].Value, 0.0
	for _, t := range ticks {
		lo, hi = min(lo, t.Value), max(hi, t.Value)
	}
	for _, r := range res.Runs {
		top = max(top, r.SteadyImagesPerS)
	}
	pad := max(0.5, 0.08*(hi-lo))
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.Y.Min, p.Y.Max = 0, 1.3*top
	for i, k := range keys {
		l, pts, err := plotter.NewLinePoints(lines[k])
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		c := palette[i%len(palette)]
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		labels, err := valueLabels(lines[k])
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		p.Add(l, pts, labels)
		if k != "" {
			p.Legend.Add(k, l, pts)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	return nil
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

// valueLabels writes each point's images/s just above it.
func valueLabels(xys plotter.XYs) (*plotter.Labels, error) {
	l := plotter.XYLabels{XYs: xys, Labels: make([]string, len(xys))}
	for i, xy := range xys {
		l.Labels[i] = fmt.Sprintf("%.0f", xy.Y)
	}
	labels, err := plotter.NewLabels(l)
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XCenter
		labels.Offset = vg.Point{Y: vg.Points(4)}
	}
	return labels, nil
}
