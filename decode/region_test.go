package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

// cropImage copies the rectangle r of m.
func cropImage(m *Image, r image.Rectangle) *Image {
	out := &Image{}
	out.Reset(r.Dx(), r.Dy())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		copy(out.Row(y-r.Min.Y), m.Row(y)[3*r.Min.X:3*r.Max.X])
	}
	return out
}

// randomRect returns a non-empty rectangle inside w×h.
func randomRect(rng interface{ IntN(int) int }, w, h int) image.Rectangle {
	x0, y0 := rng.IntN(w), rng.IntN(h)
	return image.Rect(x0, y0, x0+1+rng.IntN(w-x0), y0+1+rng.IntN(h-y0))
}

func TestStoredRect(t *testing.T) {
	rng := newRand()
	src := noiseImage(rng, 13, 7)
	for o := 1; o <= 8; o++ {
		var oriented Image
		orient(&oriented, src, o)
		for range 50 {
			r := randomRect(rng, oriented.Width, oriented.Height)
			rs := storedRect(r, o, src.Width, src.Height)
			if !rs.In(image.Rect(0, 0, src.Width, src.Height)) {
				t.Fatalf("orientation %d: %v maps to %v, outside the stored image", o, r, rs)
			}
			var got Image
			orient(&got, cropImage(src, rs), o)
			sameImage(t, &got, cropImage(&oriented, r), 0)
		}
	}
}

// TestDecodeRegionMatchesDecode checks that on the Go backend DecodeRegion equals a full
// Decode followed by the crop's resize: exactly for stored orientation (the same pixels go
// through the same kernel), within 1 when it resamples before orienting.
func TestDecodeRegionMatchesDecode(t *testing.T) {
	cases := append(generated(t), fixtureCases(t)...)
	for o := 1; o <= 8; o++ {
		name := fmt.Sprintf("orient-%d.jpg", o)
		cases = append(cases, encoded{name: name, format: JPEG, data: fixture(t, name)})
	}
	d := goDecoder(t, Options{})
	rng := newRand()
	var rs Resizer
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			full, err := d.Decode(nil, c.data)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := d.Config(c.data)
			if err != nil {
				t.Fatal(err)
			}
			tol := 0
			if cfg.Orientation != 1 {
				tol = 1
			}
			// Sequential JPEGs are resampled plane by plane, converted at the output size
			// (planar.go); converting first, as the reference does, replicates chroma
			// instead of interpolating it. Those are held to the quality bounds of DCT
			// scaling, the rest to exact equality.
			var jf jpegFast
			hd, _ := readHeader(c.data)
			m, ferr := jf.decode(c.data, hd.width, hd.height, image.Rect(0, 0, hd.width, hd.height))
			planes, subsampled := c.format == JPEG && ferr == nil, false
			if y, ok := m.(*image.YCbCr); ok && planes {
				subsampled = y.SubsampleRatio != image.YCbCrSubsampleRatio444
			}
			for range 20 {
				r := randomRect(rng, full.Width, full.Height)
				w, h := 1+rng.IntN(40), 1+rng.IntN(40)
				want, err := rs.Resize(&Image{}, full, r, w, h)
				if err != nil {
					t.Fatal(err)
				}
				got, err := d.DecodeRegion(nil, c.data, r, w, h)
				if err != nil {
					t.Fatalf("%v -> %dx%d: %v", r, w, h, err)
				}
				switch {
				case subsampled:
					// Chroma interpolated, not replicated: judged where the output is
					// at most twice the crop, where interpolation cannot dominate.
					if w > 2*r.Dx() || h > 2*r.Dy() || r.Dx() < 4 || r.Dy() < 4 {
						continue
					}
					if mean, psnr := stats(got, want); mean > 3 || psnr < 30 {
						t.Errorf("%v -> %dx%d: mean abs diff %.2f, PSNR %.1f dB against converting first", r, w, h, mean, psnr)
					}
				case planes:
					// 4:4:4 or grey: resampling the planes before converting differs by
					// rounding only.
					sameImage(t, got, want, tol+2)
				default:
					sameImage(t, got, want, tol)
				}
			}
		})
	}
}

// TestDecodeRegionTurbo is the differential test of crop-aware DCT scaling: a region of a
// JPEG decoded by libjpeg-turbo at the scale the crop allows, against image/jpeg at full
// size followed by the same crop and resize, within a mean absolute error of 2 per
// channel and a PSNR of 35 dB. Outputs are at least 8×8: a bound on the mean of a few
// pixels says little (and a 1×1 output from a scaled crop of flat 8×8 blocks, the worst
// case for DCT scaling, can be off by 27).
func TestDecodeRegionTurbo(t *testing.T) {
	turbo := turboDecoder(t, Options{})
	golang := goDecoder(t, Options{})
	var b bytes.Buffer
	if err := jpeg.Encode(&b, photo(1920, 1080), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name string
		data []byte
	}{{"photo-1920x1080", b.Bytes()}, {"orient-6", fixture(t, "orient-6.jpg")}, {"progressive", fixture(t, "progressive.jpg")}}
	rng := newRand()
	var rs Resizer
	scaled := 0
	var worstMean, worstPSNR float64 = 0, math.Inf(1)
	for _, f := range files {
		name, data := f.name, f.data
		full, err := golang.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			// Crops of at least 8×8: the backends' IDCTs differ by about 1 per channel,
			// which a strip of one row stretched to 100 rows would show as is.
			r := randomRect(rng, full.Width-7, full.Height-7)
			r.Max = r.Max.Add(image.Pt(7, 7))
			w, h := 8+rng.IntN(217), 8+rng.IntN(217)
			if i%2 == 0 && full.Width >= 1024 { // a small output from a large crop: the scaled case
				r = randomRect(rng, full.Width/2, full.Height/2).Add(image.Pt(full.Width/4, full.Height/4))
				r.Max = r.Max.Add(image.Pt(full.Width/4, full.Height/4))
				w, h = 8+rng.IntN(r.Dx()/4-7), 8+rng.IntN(r.Dy()/4-7)
			}
			want, err := rs.Resize(&Image{}, full, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			got, err := turbo.DecodeRegion(nil, data, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != w || got.Height != h {
				t.Fatalf("%s %v -> %dx%d: got %dx%d", name, r, w, h, got.Width, got.Height)
			}
			if n, d := turbo.turbo.scale(r.Dx(), r.Dy(), w, h); n != d {
				scaled++
			}
			mean, psnr := stats(got, want)
			worstMean, worstPSNR = max(worstMean, mean), min(worstPSNR, psnr)
			if mean > 2 || psnr < 35 {
				t.Errorf("%s %v -> %dx%d: mean abs error %.2f, PSNR %.1f dB", name, r, w, h, mean, psnr)
			}
		}
	}
	t.Logf("%d regions, %d DCT-scaled: worst mean abs error %.2f, worst PSNR %.1f dB", 30*len(files), scaled, worstMean, worstPSNR)
	if scaled < 10 {
		t.Errorf("only %d regions were DCT-scaled; the test does not exercise scaling", scaled)
	}
}

func TestDecodeRegionErrors(t *testing.T) {
	d := goDecoder(t, Options{})
	data := fixture(t, "gradient.png") // 64x48
	for _, tc := range []struct {
		r    image.Rectangle
		w, h int
	}{
		{image.Rect(0, 0, 0, 10), 8, 8},
		{image.Rect(-1, 0, 10, 10), 8, 8},
		{image.Rect(0, 0, 65, 48), 8, 8},
		{image.Rect(0, 0, 64, 48), 0, 8},
		{image.Rect(0, 0, 64, 48), 8, -1},
	} {
		if _, err := d.DecodeRegion(nil, data, tc.r, tc.w, tc.h); err == nil {
			t.Errorf("DecodeRegion(%v, %dx%d) succeeded", tc.r, tc.w, tc.h)
		}
	}
	if _, err := d.DecodeRegion(nil, fixture(t, "truncated.png"), image.Rect(0, 0, 8, 8), 4, 4); err == nil {
		t.Error("truncated file decoded")
	}
}

// TestDCTScalingSyntheticSet is the differential test of DCT-scaled decoding on the
// built-in synthetic set (internal/synth, as conveyor bench writes it): libjpeg-turbo at a
// reduced scale, then the resize kernel, against image/jpeg at full size and the same
// resize, for resize-first policies and for RandomResizedCrop-like regions. Every image
// must stay within a mean absolute error of 2 per channel and a PSNR of 35 dB.
func TestDCTScalingSyntheticSet(t *testing.T) {
	turbo := turboDecoder(t, Options{})
	golang := goDecoder(t, Options{})
	rng := newRand()
	var rs Resizer
	scaled, n := 0, 0
	worstMean, worstPSNR := 0.0, math.Inf(1)
	check := func(what string, got, want *Image) {
		t.Helper()
		mean, psnr := stats(got, want)
		worstMean, worstPSNR = max(worstMean, mean), min(worstPSNR, psnr)
		n++
		if mean > 2 || psnr < 35 {
			t.Errorf("%s: mean abs error %.2f, PSNR %.1f dB", what, mean, psnr)
		}
	}
	for i := range 24 {
		w, h := 500, 375
		if i%4 == 3 {
			w, h = 1920, 1080
		}
		var b bytes.Buffer
		if err := synth.EncodeJPEG(&b, synth.Generate(11, i%10, i, w, h), &synth.JPEGOptions{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		data := b.Bytes()
		full, err := golang.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{64, 128, 256} {
			p := ResizePolicy{Mode: ResizeShorter, Size: size}
			tw, th := p.OutputSize(w, h)
			want, err := rs.Resize(&Image{}, full, image.Rect(0, 0, w, h), tw, th)
			if err != nil {
				t.Fatal(err)
			}
			got, err := turbo.DecodeRegion(nil, data, image.Rect(0, 0, w, h), tw, th)
			if err != nil {
				t.Fatal(err)
			}
			if num, den := turbo.turbo.scale(w, h, tw, th); num != den {
				scaled++
			}
			check(fmt.Sprintf("image %d %dx%d -> %dx%d", i, w, h, tw, th), got, want)
		}
		// RandomResizedCrop-like: a crop of 25-100% of the area, aspect 3/4..4/3, to 112 or 224.
		for range 4 {
			cw := w/2 + rng.IntN(w/2)
			ch := min(h, max(h/2, cw*3/4+rng.IntN(cw/2)))
			r := image.Rect(0, 0, cw, ch).Add(image.Pt(rng.IntN(w-cw+1), rng.IntN(h-ch+1)))
			out := 112 * (1 + rng.IntN(2))
			want, err := rs.Resize(&Image{}, full, r, out, out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := turbo.DecodeRegion(nil, data, r, out, out)
			if err != nil {
				t.Fatal(err)
			}
			if num, den := turbo.turbo.scale(r.Dx(), r.Dy(), out, out); num != den {
				scaled++
			}
			check(fmt.Sprintf("image %d crop %v -> %d", i, r, out), got, want)
		}
	}
	t.Logf("%d comparisons, %d DCT-scaled: worst mean abs error %.2f, worst PSNR %.1f dB", n, scaled, worstMean, worstPSNR)
	if scaled < n/3 {
		t.Errorf("only %d of %d decodes were DCT-scaled", scaled, n)
	}
}

// TestDecodeRegionLibWebP decodes regions and resized copies of the WebP fixtures with
// libwebp, which crops the rows below a region away and, for a small output, crops and
// scales while decoding, against the Go decoder's whole image resampled: close (a box
// filter before the triangle filter, as with a JPEG's DCT scaling), and exact when
// nothing is scaled.
func TestDecodeRegionLibWebP(t *testing.T) {
	native := nativeDecoder(t, (*Decoder).WebPBackend, "libwebp")
	golang := goDecoder(t, Options{})
	rng := newRand()
	var rs Resizer
	scaled := 0
	var worstMean, worstPSNR float64 = 0, math.Inf(1)
	for _, name := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "lossless-alpha.webp"} {
		data := fixture(t, name)
		full, err := golang.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			r := randomRect(rng, full.Width-7, full.Height-7)
			r.Max = r.Max.Add(image.Pt(7, 7))
			w, h := 4+rng.IntN(60), 4+rng.IntN(60)
			if i%2 == 0 { // an output at most a quarter of the region: scaled
				r = randomRect(rng, full.Width/4, full.Height/4)
				r.Max = image.Pt(r.Max.X+full.Width/2, r.Max.Y+full.Height/2)
				w, h = 4+rng.IntN(r.Dx()/(2*webpGap)-3), 4+rng.IntN(r.Dy()/(2*webpGap)-3)
			}
			want, err := rs.Resize(&Image{}, full, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			got, err := native.DecodeRegion(nil, data, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != w || got.Height != h {
				t.Fatalf("%s %v -> %dx%d: got %dx%d", name, r, w, h, got.Width, got.Height)
			}
			if _, _, _, ok := webpScale(r, w, h); !ok {
				sameImage(t, got, want, 0)
				continue
			}
			scaled++
			mean, psnr := stats(got, want)
			worstMean, worstPSNR = max(worstMean, mean), min(worstPSNR, psnr)
			if mean > 3 || psnr < 30 {
				t.Errorf("%s %v -> %dx%d: mean abs error %.2f, PSNR %.1f dB", name, r, w, h, mean, psnr)
			}
		}
	}
	// Resize-first of the whole image: scaled by libwebp (so not the Go decoder's pixels),
	// close to them.
	p := ResizePolicy{Mode: ResizeFit, Width: 8, Height: 8} // small enough for libwebp to scale 64x48
	resizing, err := NewDecoder(&Options{Resize: p})
	if err != nil {
		t.Fatal(err)
	}
	defer resizing.Close()
	for _, name := range []string{"lossy.webp", "lossless.webp"} {
		got, err := resizing.Decode(nil, fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := goDecoder(t, Options{Resize: p}).Decode(nil, fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		mean, psnr := stats(got, want)
		if mean == 0 || mean > 3 || psnr < 30 {
			t.Errorf("%s resized to fit 8x8: mean abs error %.2f, PSNR %.1f dB from the Go decoder's (0: libwebp did not scale it)", name, mean, psnr)
		}
	}
	t.Logf("%d of %d regions scaled: worst mean abs error %.2f, worst PSNR %.1f dB", scaled, 40*4, worstMean, worstPSNR)
	if scaled < 40 {
		t.Errorf("only %d regions were scaled; the test does not exercise scaling", scaled)
	}
}

// TestDecodeRowsMatchesTurboJPEG: crops at full scale decoded through libjpeg's API, which
// stops below the crop, equal to the bit the same crops decoded whole by TurboJPEG, in
// every sampling layout; and most of them did stop early.
func TestDecodeRowsMatchesTurboJPEG(t *testing.T) {
	rows := turboDecoder(t, Options{})
	if rows.turbo.rows == nil {
		t.Skip("libjpeg's API (libjpeg62-turbo or libjpeg-turbo8) not available: decodes go through TurboJPEG only")
	}
	whole := turboDecoder(t, Options{})
	whole.turbo.rows.Close()
	whole.turbo.rows = nil
	var b bytes.Buffer
	if err := jpeg.Encode(&b, photo(500, 375), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"photo-500x375": b.Bytes()}
	for _, name := range []string{"sample-1x1", "sample-2x1", "sample-2x2", "sample-1x2", "sample-4x1", "restart", "gray", "non-interleaved", "q3-extended"} {
		files[name] = fixture(t, "sequential/"+name+".jpg")
	}
	rng := newRand()
	early := 0
	for name, data := range files {
		cfg, err := whole.Config(data)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			r := randomRect(rng, cfg.Width, cfg.Height)
			// Outputs over half the crop: no DCT scaling, so libjpeg's API is used.
			w, h := (r.Dx()+1)/2+rng.IntN(r.Dx()), (r.Dy()+1)/2+rng.IntN(r.Dy())
			want, err := whole.DecodeRegion(nil, data, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rows.DecodeRegion(nil, data, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != want.Width || got.Height != want.Height || !bytes.Equal(got.Pix, want.Pix) {
				t.Fatalf("%s %v -> %dx%d: differs from TurboJPEG's whole decode", name, r, w, h)
			}
			if y := rows.turbo.gray.Pix; cfg.Height > 16 && len(y) > 0 && len(y)/rows.turbo.gray.Stride < cfg.Height ||
				len(rows.turbo.ycc.Y) > 0 && len(rows.turbo.ycc.Y)/rows.turbo.ycc.YStride < cfg.Height {
				early++
			}
			rows.turbo.gray.Pix, rows.turbo.ycc.Y = nil, nil
		}
	}
	if early < 40*len(files)/4 {
		t.Errorf("only %d of %d decodes stopped above the last row", early, 40*len(files))
	}
	t.Logf("%d of %d decodes stopped above the last row", early, 40*len(files))
}
