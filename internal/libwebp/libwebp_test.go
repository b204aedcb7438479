package libwebp

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"testing"
)

func lib(t *testing.T) *Lib {
	t.Helper()
	l, err := Load()
	if err != nil {
		t.Skipf("libwebp not available, so its decoder cannot be tested: %v", err)
	}
	return l
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/decode/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeMatchesPIL decodes the WebP fixtures and compares with what PIL (libwebp)
// decoded them to: exactly.
func TestDecodeMatchesPIL(t *testing.T) {
	l := lib(t)
	t.Logf("libwebp %s", l.Version())
	for webp, want := range map[string]string{
		"lossy.webp":          "lossy-webp-pil.png",
		"lossy-alpha.webp":    "lossy-alpha-webp-pil.png",
		"lossless.webp":       "gradient.png",
		"lossless-alpha.webp": "gradient-alpha.png",
	} {
		data := read(t, webp)
		w, h, err := l.Info(data)
		if err != nil {
			t.Fatal(err)
		}
		const pad = 5 // a stride wider than the row
		dst := make([]byte, h*(3*w+pad))
		if err := l.DecodeRGB(dst, 3*w+pad, w, h, data); err != nil {
			t.Fatalf("%s: %v", webp, err)
		}
		ref, err := png.Decode(bytes.NewReader(read(t, want)))
		if err != nil {
			t.Fatal(err)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(ref.At(x, y)).(color.NRGBA) // the PNGs are RGB or NRGBA: exact
				p := dst[y*(3*w+pad)+3*x:]
				if p[0] != c.R || p[1] != c.G || p[2] != c.B {
					t.Fatalf("%s: pixel (%d,%d) = %v, PIL %d %d %d", webp, x, y, p[:3], c.R, c.G, c.B)
				}
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	l := lib(t)
	data := read(t, "lossy.webp")
	w, h, err := l.Info(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 3*w*h)
	for name, tc := range map[string]struct {
		data       []byte
		w, h, size int
	}{
		"truncated":   {data[:len(data)/2], w, h, len(dst)},
		"wrong size":  {data, w + 1, h, 3 * (w + 1) * h},
		"small dst":   {data, w, h, len(dst) - 1},
		"empty":       {nil, w, h, len(dst)},
		"not webp":    {read(t, "gradient.png"), w, h, len(dst)},
		"random tail": {append(append([]byte{}, data[:30]...), bytes.Repeat([]byte{0x55}, 200)...), w, h, len(dst)},
	} {
		buf := make([]byte, tc.size)
		if err := l.DecodeRGB(buf, 3*tc.w, tc.w, tc.h, tc.data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeRGB feeds arbitrary bytes to libwebp: no crash, and a success only for the
// size Info reports.
func FuzzDecodeRGB(f *testing.F) {
	for _, n := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "lossless-alpha.webp"} {
		b, err := os.ReadFile("../../testdata/decode/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	l, err := Load()
	if err != nil {
		f.Skipf("libwebp not available: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, err := l.Info(data)
		if err != nil || int64(w)*int64(h) > 1<<20 {
			return
		}
		dst := make([]byte, 3*w*h)
		_ = l.DecodeRGB(dst, 3*w, w, h, data)
		// The lower right quarter, scaled to half its size: cropping and scaling.
		r := image.Rect(w/2&^1, h/2&^1, w, h)
		if !r.Empty() {
			_ = l.DecodeRGBRegion(dst, 3*w, data, w, h, r, max(1, r.Dx()/2), max(1, r.Dy()/2))
		}
	})
}

// TestDecodeRegion decodes rectangles of the fixtures with cropping alone, which gives the
// pixels of the whole image's decode inside them (exactly when the image is lossless, or
// the rectangle starts at the top left corner and ends after an odd number of rows or at
// the bottom; a lossy crop's first row and column, and a last row that ends a pair
// sharing chroma, are upsampled as an edge, a few levels off), and scaled, which gives an image of
// the size asked whose mean stays within 2 levels of the region's (a box-filtered copy).
func TestDecodeRegion(t *testing.T) {
	l := lib(t)
	for _, name := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "lossless-alpha.webp"} {
		data := read(t, name)
		w, h, err := l.Info(data)
		if err != nil {
			t.Fatal(err)
		}
		whole := make([]byte, 3*w*h)
		if err := l.DecodeRGB(whole, 3*w, w, h, data); err != nil {
			t.Fatal(err)
		}
		for _, r := range []image.Rectangle{image.Rect(0, 0, w, h), image.Rect(0, 0, w, h/2+1), image.Rect(0, 0, w-3, h-5), image.Rect(0, 0, w, h/2),
			image.Rect(2, 4, w-1, h-3), image.Rect(w/2&^1, h/2&^1, w, h), image.Rect(0, 0, 1, 1)} {
			// Cropped: the same pixels.
			const pad = 3
			got := make([]byte, r.Dy()*(3*r.Dx()+pad))
			if err := l.DecodeRGBRegion(got, 3*r.Dx()+pad, data, w, h, r, r.Dx(), r.Dy()); err != nil {
				t.Fatalf("%s %v: %v", name, r, err)
			}
			exact := r.Min == image.Point{} && (r.Max.Y%2 == 1 || r.Max.Y == h) || strings.HasPrefix(name, "lossless")
			var sum, diff float64
			worst := 0
			for y := range r.Dy() {
				row := got[y*(3*r.Dx()+pad):][:3*r.Dx()]
				want := whole[(r.Min.Y+y)*3*w+3*r.Min.X:][:3*r.Dx()]
				if exact && string(row) != string(want) {
					t.Fatalf("%s %v: row %d differs from the whole image's", name, r, y)
				}
				for x, v := range row {
					sum += float64(v)
					d := int(v) - int(want[x])
					diff += float64(max(d, -d))
					worst = max(worst, d, -d)
				}
			}
			if diff /= float64(3 * r.Dx() * r.Dy()); diff > 0.5 || worst > 8 {
				t.Errorf("%s %v: mean difference %.2f, worst %d, from the whole image's pixels", name, r, diff, worst)
			}
			mean := sum / float64(3*r.Dx()*r.Dy())
			// Scaled to a third: the size asked, about the same colours.
			sw, sh := max(1, r.Dx()/3), max(1, r.Dy()/3)
			small := make([]byte, 3*sw*sh)
			if err := l.DecodeRGBRegion(small, 3*sw, data, w, h, r, sw, sh); err != nil {
				t.Fatalf("%s %v to %dx%d: %v", name, r, sw, sh, err)
			}
			var ssum float64
			for _, v := range small {
				ssum += float64(v)
			}
			if d := ssum/float64(len(small)) - mean; d > 2 || d < -2 {
				t.Errorf("%s %v to %dx%d: mean %.1f, the region's %.1f", name, r, sw, sh, ssum/float64(len(small)), mean)
			}
		}
		// Odd corners, rectangles outside and short buffers are refused before libwebp.
		for _, r := range []image.Rectangle{image.Rect(1, 0, w, h), image.Rect(0, 0, w+1, h), {}} {
			if err := l.DecodeRGBRegion(make([]byte, 3*w*h), 3*w, data, w, h, r, max(1, r.Dx()), max(1, r.Dy())); err == nil {
				t.Errorf("%s: %v accepted", name, r)
			}
		}
		if err := l.DecodeRGBRegion(whole[:10], 3*w, data, w, h, image.Rect(0, 0, w, h), w, h); err == nil {
			t.Errorf("%s: a short buffer accepted", name)
		}
		if err := l.DecodeRGBRegion(whole, 3*w, data[:len(data)/2], w, h, image.Rect(0, 0, w, h), w, h); err == nil {
			t.Errorf("%s: half the file decoded", name)
		}
	}
}
