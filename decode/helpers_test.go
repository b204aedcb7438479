package decode

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

const fixtures = "../testdata/decode"

// fixture returns the bytes of testdata/decode/name.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureRGB decodes a PNG fixture with image/png and converts it with refRGB.
func fixtureRGB(t testing.TB, name string) *Image {
	t.Helper()
	m, err := png.Decode(bytes.NewReader(fixture(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	return refRGB(m)
}

// refRGB is the straightforward per-pixel conversion Decode must match: the colour
// model's own conversion to non-premultiplied RGBA, alpha dropped. YCbCr and CMYK use the
// standard library's 8-bit conversion functions, as image/jpeg users do.
func refRGB(m image.Image) *Image {
	b := m.Bounds()
	out := &Image{}
	out.Reset(b.Dx(), b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var r, g, bl uint8
			switch c := m.At(x, y).(type) {
			case color.YCbCr:
				r, g, bl = color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
			case color.NYCbCrA:
				r, g, bl = color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
			case color.NRGBA64: // the high byte of the stored value, as PIL's convert
				r, g, bl = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			case color.CMYK:
				r, g, bl = color.CMYKToRGB(c.C, c.M, c.Y, c.K)
			default:
				n := color.NRGBAModel.Convert(c).(color.NRGBA)
				r, g, bl = n.R, n.G, n.B
			}
			p := out.Pix[(y-b.Min.Y)*out.Stride+3*(x-b.Min.X):]
			p[0], p[1], p[2] = r, g, bl
		}
	}
	return out
}

// sameImage fails the test unless got and want have the same size and every channel is
// within tol.
func sameImage(t testing.TB, got, want *Image, tol int) {
	t.Helper()
	if got.Width != want.Width || got.Height != want.Height {
		t.Fatalf("size %dx%d, want %dx%d", got.Width, got.Height, want.Width, want.Height)
	}
	if d, x, y, c := maxDiff(got, want); d > tol {
		t.Fatalf("channel %d of pixel (%d,%d) is %d, want %d (tolerance %d)", c, x, y,
			got.Row(y)[3*x+c], want.Row(y)[3*x+c], tol)
	}
}

// stats returns the largest mean absolute error over the three channels and the PSNR
// (dB) between two images of the same size.
func stats(a, b *Image) (meanAbs, psnr float64) {
	var sum [3]float64
	var sq float64
	for y := 0; y < a.Height; y++ {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := float64(ra[i]) - float64(rb[i])
			sum[i%3] += math.Abs(d)
			sq += d * d
		}
	}
	n := float64(a.Width * a.Height)
	meanAbs = max(sum[0], sum[1], sum[2]) / n
	mse := sq / (3 * n)
	if mse == 0 {
		return meanAbs, math.Inf(1)
	}
	return meanAbs, 10 * math.Log10(255*255/mse)
}

// photo returns a w×h image that compresses like a photograph: smooth shading, edges
// and a little texture, deterministic.
func photo(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			r := 128 + 100*math.Sin(6*fx+2*fy)
			g := 128 + 90*math.Cos(5*fy-3*fx)
			b := 128 + 80*math.Sin(9*fx*fy+1)
			if (x/37+y/29)%5 == 0 { // hard-edged patches
				r, g = g, 255-r
			}
			tex := float64((x*7919+y*104729)%17) - 8
			m.Set(x, y, color.RGBA{clampF(r + tex), clampF(g + tex), clampF(b - tex), 255})
		}
	}
	return m
}

func clampF(v float64) uint8 { return uint8(max(0, min(255, math.Round(v)))) }

// newRand returns a deterministic random source.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// refFancyRGB converts m as a JPEG decoder with libjpeg's default chroma upsampling does,
// computed the plain way: each pixel's chroma interpolated bilinearly, in floating point,
// from the chroma samples around it, each centred on the luma samples it covers, the
// edge samples repeated beyond the image; then color.YCbCrToRGB. It differs from
// libjpeg-turbo's integer rounding by at most one level of chroma. Layouts libjpeg
// replicates (4:1:1, 4:1:0) and images two chroma samples wide or less are converted by
// refRGB.
func refFancyRGB(m *image.YCbCr) *Image {
	hs, vs, _ := chromaShifts(m.SubsampleRatio)
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	cw, ch := (w+1<<hs-1)>>hs, (h+1<<vs-1)>>vs
	if hs > 1 || hs+vs == 0 || hs == 1 && cw <= 2 {
		return refRGB(m)
	}
	at := func(p []uint8, cx, cy int) float64 {
		cx, cy = max(0, min(cx, cw-1)), max(0, min(cy, ch-1))
		return float64(p[cy*m.CStride+cx])
	}
	// pos returns the two chroma samples around luma sample i on an axis subsampled by
	// 2^s, and the weight of the second.
	pos := func(i, s int) (int, int, float64) {
		if s == 0 {
			return i, i, 0
		}
		f := (float64(i)+0.5)/2 - 0.5
		lo := int(math.Floor(f))
		return lo, lo + 1, f - float64(lo)
	}
	out := &Image{}
	out.Reset(w, h)
	for y := 0; y < h; y++ {
		y0, y1, fy := pos(y, vs)
		for x := 0; x < w; x++ {
			x0, x1, fx := pos(x, hs)
			c := func(p []uint8) uint8 {
				v := (1-fy)*((1-fx)*at(p, x0, y0)+fx*at(p, x1, y0)) + fy*((1-fx)*at(p, x0, y1)+fx*at(p, x1, y1))
				return uint8(math.Round(v))
			}
			r, g, bl := color.YCbCrToRGB(m.Y[y*m.YStride+x], c(m.Cb), c(m.Cr))
			p := out.Row(y)[3*x:]
			p[0], p[1], p[2] = r, g, bl
		}
	}
	return out
}
