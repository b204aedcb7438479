package main

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotCurve draws the training and validation loss and the validation accuracy per epoch.
func plotCurve(path string, res []epochResult, o options) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("GoMLX CNN (simplego) fed by conveyor: task %s, %dx%d, batch %d", o.task, o.size, o.size, o.batch)
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "loss (cross-entropy) / accuracy"
	p.Add(plotter.NewGrid())
	lines := []struct {
		name string
		c    color.Color
		v    func(epochResult) float64
	}{
		{"train loss", color.RGBA{0x1f, 0x77, 0xb4, 0xff}, func(r epochResult) float64 { return r.TrainLoss }},
		{"validation loss", color.RGBA{0xff, 0x7f, 0x0e, 0xff}, func(r epochResult) float64 { return r.ValLoss }},
		{"validation accuracy", color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, func(r epochResult) float64 { return r.ValAcc }},
	}
	for _, l := range lines {
		var xy plotter.XYs
		for _, r := range res {
			if v := l.v(r); !math.IsNaN(v) {
				xy = append(xy, plotter.XY{X: float64(r.Epoch + 1), Y: v})
			}
		}
		if len(xy) == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		line.Color, pts.Color = l.c, l.c
		line.Width = vg.Points(1.5)
		pts.Radius = vg.Points(2)
		p.Add(line, pts)
		p.Legend.Add(l.name, line, pts)
	}
	if len(res) > 0 && !math.IsNaN(res[0].ValAcc) {
		chance, err := plotter.NewLine(plotter.XYs{{X: 1, Y: 1 / float64(res[0].Classes)}, {X: float64(len(res)), Y: 1 / float64(res[0].Classes)}})
		if err != nil {
			return err
		}
		chance.Color = color.Gray{0x99}
		chance.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(chance)
		p.Legend.Add("chance accuracy", chance)
	}
	p.Y.Min = 0
	top := 1.0
	for _, r := range res {
		for _, v := range []float64{r.TrainLoss, r.ValLoss} {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	p.Y.Max = 1.35 * top // room for the legend
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
