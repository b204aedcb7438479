package augment

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
)

// TestParamsMatchTorchvision compares the ops' parameter draws with draws from
// torchvision 0.14.1's own get_params (testdata/params, made by gen.py there): every
// parameter's distribution, by a two-sample Kolmogorov–Smirnov test at significance
// 0.001 (fixed seeds, so deterministic).
func TestParamsMatchTorchvision(t *testing.T) {
	js, err := os.ReadFile("testdata/params/draws.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]struct {
		Width, Height int
		Scale, Ratio  [2]float64
		Degrees       [2]float64
		Translate     [2]float64
		Shear         [4]float64
		Padding       int
		ImageWidth    int     `json:"image_width"`
		ImageHeight   int     `json:"image_height"`
		Distortion    float64 `json:"distortion_scale"`
		Draws         json.RawMessage
	}
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	r := rand.New(rand.NewPCG(2026, 19))
	// compare KS-tests column k of got against column k of want.
	compare := func(name string, cols []string, got [][]float64, raw json.RawMessage) {
		t.Helper()
		var want [][]float64
		if err := json.Unmarshal(raw, &want); err != nil {
			// A list of numbers: one column.
			want = nil
			var flat []float64
			if err := json.Unmarshal(raw, &flat); err != nil {
				t.Fatal(err)
			}
			for _, v := range flat {
				want = append(want, []float64{v})
			}
		}
		if len(want) < 1000 {
			t.Fatalf("%s: %d torchvision draws", name, len(want))
		}
		for k, col := range cols {
			var a, b []float64
			for _, row := range got {
				a = append(a, row[k])
			}
			for _, row := range want {
				b = append(b, row[k])
			}
			if s, crit := ksStatistic(a, b), ksCritical(len(a), len(b)); s > crit {
				t.Errorf("%s %s: KS statistic %.4f > %.4f", name, col, s, crit)
			}
		}
	}

	for _, name := range []string{"erasing_224", "erasing_12x40"} {
		c := d[name]
		o := &RandomErasing{P: 1, Scale: c.Scale, Ratio: c.Ratio}
		var got [][]float64
		for range n {
			rect, ok := o.Params(r, c.Width, c.Height)
			if !ok { // torchvision returns the whole image
				got = append(got, []float64{0, 0, float64(c.Height), float64(c.Width)})
				continue
			}
			got = append(got, []float64{float64(rect.Min.Y), float64(rect.Min.X), float64(rect.Dy()), float64(rect.Dx())})
		}
		compare(name, []string{"top", "left", "height", "width"}, got, c.Draws)
	}

	a := d["affine"]
	ra := &RandomAffine{Degrees: a.Degrees, Translate: a.Translate, Scale: a.Scale, Shear: a.Shear}
	var got [][]float64
	for range n {
		angle, tr, s, sh := ra.Params(r, a.Width, a.Height)
		got = append(got, []float64{angle, tr[0], tr[1], s, sh[0], sh[1]})
	}
	compare("affine", []string{"angle", "tx", "ty", "scale", "shear x", "shear y"}, got, a.Draws)

	rot := d["rotation"]
	rr := &RandomRotation{Degrees: rot.Degrees}
	got = nil
	for range n {
		got = append(got, []float64{rr.Params(r)})
	}
	compare("rotation", []string{"angle"}, got, rot.Draws)

	p := d["perspective"]
	rp := &RandomPerspective{DistortionScale: p.Distortion, P: 1}
	got = nil
	for range n {
		e := rp.Corners(r, p.Width, p.Height)
		got = append(got, []float64{float64(e[0][0]), float64(e[0][1]), float64(e[1][0]), float64(e[1][1]),
			float64(e[2][0]), float64(e[2][1]), float64(e[3][0]), float64(e[3][1])})
	}
	compare("perspective", []string{"tl x", "tl y", "tr x", "tr y", "br x", "br y", "bl x", "bl y"}, got, p.Draws)

	cr := d["crop"]
	rc := &RandomCrop{Width: cr.Width, Height: cr.Height, Padding: [4]int{cr.Padding, cr.Padding, cr.Padding, cr.Padding}}
	got = nil
	for range n {
		rect, err := rc.Params(r, cr.ImageWidth, cr.ImageHeight)
		if err != nil {
			t.Fatal(err)
		}
		// torchvision's offsets are in the padded image.
		got = append(got, []float64{float64(rect.Min.Y + cr.Padding), float64(rect.Min.X + cr.Padding)})
	}
	compare("crop", []string{"top", "left"}, got, cr.Draws)
}
