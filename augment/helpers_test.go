package augment

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// photo returns a deterministic, photo-like width×height test image: a colour gradient,
// a few soft discs, a sinusoidal texture and mild noise, so that resampling filters see
// both smooth areas and edges.
func photo(tb testing.TB, index, width, height int) *decode.Image {
	tb.Helper()
	r := rand.New(rand.NewPCG(uint64(index), 77))
	var discs [5]struct {
		x, y, rad float64
		col       [3]float64
	}
	for i := range discs {
		d := &discs[i]
		d.x, d.y = r.Float64()*float64(width), r.Float64()*float64(height)
		d.rad = (0.05 + 0.2*r.Float64()) * float64(min(width, height))
		for c := range 3 {
			d.col[c] = 255 * r.Float64()
		}
	}
	var c0, c1 [3]float64
	for c := range 3 {
		c0[c], c1[c] = 40+170*r.Float64(), 40+170*r.Float64()
	}
	period := 3 + 12*r.Float64()
	m := &decode.Image{}
	m.Reset(width, height)
	for y := range height {
		row := m.Row(y)
		for x := range width {
			t := (float64(x)/float64(width) + float64(y)/float64(height)) / 2
			var px [3]float64
			for c := range 3 {
				px[c] = c0[c] + (c1[c]-c0[c])*t + 12*math.Sin(float64(x+2*y)/period+float64(c))
			}
			for _, d := range discs {
				dist := math.Hypot(float64(x)-d.x, float64(y)-d.y)
				a := math.Max(0, math.Min(1, d.rad-dist)) // one pixel of antialiasing
				for c := range 3 {
					px[c] += a * (d.col[c] - px[c])
				}
			}
			for c := range 3 {
				row[3*x+c] = uint8(math.Max(0, math.Min(255, px[c]+4*r.NormFloat64())))
			}
		}
	}
	return m
}

func clone(m *decode.Image) *decode.Image {
	out := &decode.Image{}
	out.Reset(m.Width, m.Height)
	for y := range m.Height {
		copy(out.Row(y), m.Row(y))
	}
	return out
}

func fromNRGBA(src *image.NRGBA) *decode.Image {
	b := src.Bounds()
	m := &decode.Image{}
	m.Reset(b.Dx(), b.Dy())
	for y := range m.Height {
		row := m.Row(y)
		s := src.Pix[(y)*src.Stride:]
		for x := range m.Width {
			copy(row[3*x:3*x+3], s[4*x:4*x+3])
		}
	}
	return m
}

func toNRGBA(m *decode.Image) *image.NRGBA {
	out := image.NewNRGBA(image.Rect(0, 0, m.Width, m.Height))
	for y := range m.Height {
		row := m.Row(y)
		for x := range m.Width {
			o := out.PixOffset(x, y)
			out.Pix[o], out.Pix[o+1], out.Pix[o+2], out.Pix[o+3] = row[3*x], row[3*x+1], row[3*x+2], 255
		}
	}
	return out
}

// pixelDiff returns the mean and maximum absolute difference of two equally sized images.
func pixelDiff(tb testing.TB, a, b *decode.Image) (mean float64, worst int) {
	tb.Helper()
	if a.Width != b.Width || a.Height != b.Height {
		tb.Fatalf("sizes differ: %dx%d vs %dx%d", a.Width, a.Height, b.Width, b.Height)
	}
	var sum int
	for y := range a.Height {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := int(ra[i]) - int(rb[i])
			if d < 0 {
				d = -d
			}
			sum += d
			worst = max(worst, d)
		}
	}
	return float64(sum) / float64(3*a.Width*a.Height), worst
}

// equalImages reports whether a and b have the same size and pixels (strides may differ).
func equalImages(a, b *decode.Image) bool {
	if a.Width != b.Width || a.Height != b.Height {
		return false
	}
	for y := range a.Height {
		if string(a.Row(y)) != string(b.Row(y)) {
			return false
		}
	}
	return true
}

// seeded returns a Context seeded with (1, 0, index).
func seeded(index int64) *Context {
	c := NewContext()
	c.Seed(1, 0, index)
	return c
}

// ksCritical is the two-sample Kolmogorov–Smirnov critical value at significance 0.001.
func ksCritical(n, m int) float64 {
	return math.Sqrt(-math.Log(0.001/2)/2) * math.Sqrt(float64(n+m)/float64(n*m))
}
