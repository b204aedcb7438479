package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// greyRGB returns a packed RGB image whose three channels all hold the plane's samples,
// so that the packed reference (resizeRef) can judge one-channel resampling.
func greyRGB(plane []uint8, stride, w, h int) *Image {
	m := new(Image)
	m.Reset(w, h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := plane[y*stride+x]
			m.Pix[y*m.Stride+3*x], m.Pix[y*m.Stride+3*x+1], m.Pix[y*m.Stride+3*x+2] = v, v, v
		}
	}
	return m
}

// TestResizePlaneMatchesReference checks one-channel resampling, with the AVX2 and the Go
// kernels, against the exact (float64) filter: within ±1 per sample (the bar is
// ±2), over random planes, crops and output sizes, shrinking and enlarging.
func TestResizePlaneMatchesReference(t *testing.T) {
	have := useAVX2
	defer func(v bool) { useAVX2 = v }(useAVX2)
	rng := rand.New(rand.NewPCG(11, 12))
	var z Resizer
	var ref Image
	for i := 0; i < 80; i++ {
		sw, sh := 1+rng.IntN(300), 1+rng.IntN(300)
		stride := sw + rng.IntN(9)
		plane := make([]uint8, stride*sh)
		for j := range plane {
			plane[j] = uint8(rng.IntN(256))
		}
		x0, y0 := rng.IntN(sw), rng.IntN(sh)
		r := image.Rect(x0, y0, x0+1+rng.IntN(sw-x0), y0+1+rng.IntN(sh-y0))
		w, h := 1+rng.IntN(250), 1+rng.IntN(250)
		resizeRef(&ref, greyRGB(plane, stride, sw, sh), r, w, h)
		for _, simd := range []bool{false, true} {
			if simd && !have {
				continue
			}
			useAVX2 = simd
			got := make([]uint8, w*h)
			sx, sy := wholeSpans(r)
			z.resizePlane(got, plane, stride, r, sx, sy, w, h)
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					g, want := got[y*w+x], ref.Pix[y*ref.Stride+3*x]
					if d := absDiff(g, want); d > 1 {
						t.Fatalf("AVX2 %v: %dx%d crop %v -> %dx%d: (%d,%d) = %d, reference %d", simd, sw, sh, r, w, h, x, y, g, want)
					}
				}
			}
		}
	}
}

// TestResizePlaneKernelsAgree checks that the AVX2 one-channel kernels compute exactly
// what the Go ones do, with fractional spans as DCT scaling produces.
func TestResizePlaneKernelsAgree(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine")
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	rng := rand.New(rand.NewPCG(13, 14))
	var z Resizer
	for i := 0; i < 100; i++ {
		sw, sh := 2+rng.IntN(400), 2+rng.IntN(400)
		plane := make([]uint8, sw*sh)
		for j := range plane {
			plane[j] = uint8(rng.IntN(256))
		}
		r := image.Rect(0, 0, sw, sh)
		sx := span{rng.Float64() * 0.9, float64(sw-1) + rng.Float64()*0.1}
		sy := span{rng.Float64() * 0.9, float64(sh-1) + rng.Float64()*0.1}
		w, h := 1+rng.IntN(300), 1+rng.IntN(300)
		a, b := make([]uint8, w*h), make([]uint8, w*h)
		useAVX2 = true
		z.resizePlane(a, plane, sw, r, sx, sy, w, h)
		useAVX2 = false
		z.resizePlane(b, plane, sw, r, sx, sy, w, h)
		if !bytes.Equal(a, b) {
			t.Fatalf("%dx%d spans %v %v -> %dx%d: the AVX2 and Go kernels differ", sw, sh, sx, sy, w, h)
		}
	}
}

// TestHoriz8to16x1Kernels checks the one-channel horizontal kernel's AVX2 paths, the
// shuffling one (quads whose taps lie within 16 bytes) and the gathering one it leaves
// the row's last quads to when the 16-byte loads would leave src, against the Go kernel,
// on rows that end with the taps and rows with room after them.
func TestHoriz8to16x1Kernels(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	shuffled := 0
	for i := 0; i < 2000; i++ {
		n, out := 4+rng.IntN(500), 4+rng.IntN(300)
		sp := span{rng.Float64() * 0.9, float64(n-1) + rng.Float64()*0.1}
		var p axisPlan
		p.compute(n, out, 4, sp)
		if !p.simd {
			continue
		}
		src := make([]uint8, n+rng.IntN(2)*rng.IntN(20))
		for j := range src {
			src[j] = uint8(rng.IntN(256))
		}
		a, b := make([]uint16, out), make([]uint16, out)
		horiz8to16x1(a, src, &p)
		horizX1(b, src, &p, 0, round1, shift1)
		if !slices.Equal(a, b) {
			t.Fatalf("%d -> %d (span %v, %d bytes): the AVX2 and Go kernels differ", n, out, sp, len(src))
		}
		if p.shuffles() != nil {
			shuffled++
		}
	}
	if shuffled < 500 {
		t.Errorf("%d plans took the shuffling kernel, want more", shuffled)
	}
}

// planeRef is an exact (float64) reference for resampling the continuous box
// [x0, x1)×[y0, y1) of a plane to w×h with the antialiased triangle filter, its taps
// clamped to the whole samples the box touches, rounded once at the end.
func planeRef(plane []uint8, stride, pw, ph int, x0, y0, x1, y1 float64, w, h int) []uint8 {
	axis := func(b0, b1 float64, n, out int) (lo, hi []int, wt [][]float64) {
		scale := (b1 - b0) / float64(out)
		support := math.Max(scale, 1)
		first, last := int(math.Floor(b0)), min(int(math.Ceil(b1)), n)
		for i := 0; i < out; i++ {
			c := b0 + (float64(i)+0.5)*scale
			a := max(int(math.Floor(c-support+0.5)), first)
			b := min(int(math.Floor(c+support+0.5)), last)
			if b <= a {
				a = min(max(int(c), first), last-1)
				b = a + 1
			}
			var ws []float64
			var total float64
			for x := a; x < b; x++ {
				v := math.Max(0, 1-math.Abs((float64(x)-c+0.5)/support))
				ws = append(ws, v)
				total += v
			}
			for k := range ws {
				ws[k] /= total
			}
			lo, hi, wt = append(lo, a), append(hi, b), append(wt, ws)
		}
		return lo, hi, wt
	}
	xl, _, xw := axis(x0, x1, pw, w)
	yl, _, yw := axis(y0, y1, ph, h)
	out := make([]uint8, w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var v float64
			for j, wy := range yw[y] {
				row := plane[(yl[y]+j)*stride:]
				for k, wx := range xw[x] {
					v += wy * wx * float64(row[xl[x]+k])
				}
			}
			out[y*w+x] = clamp8(v)
		}
	}
	return out
}

// TestResizeYCbCr checks planar resampling of decoded JPEG planes against an exact
// reference of the same operation, on every chroma layout the fixtures have and random
// crops (shrinking and enlarging): luma from the crop, chroma from the same region of its
// plane (luma coordinates divided by the subsampling factor, as JFIF centres chroma), then
// color.YCbCrToRGB. Each plane within ±1 of exact allows ±3 per RGB channel.
func TestResizeYCbCr(t *testing.T) {
	var d jpegFast
	var z Resizer
	var got Image
	rng := newRand()
	for _, name := range sequentialFixtures(t) {
		data := fixture(t, "sequential/"+name+".jpg")
		m := fastPlanes(t, &d, data, image.Rectangle{})
		if !planar(m) {
			t.Fatalf("%s: %T not planar", name, m)
		}
		b := m.Bounds()
		for range 10 {
			x0, y0 := rng.IntN(b.Dx()-4), rng.IntN(b.Dy()-4)
			r := image.Rect(x0, y0, x0+4+rng.IntN(b.Dx()-x0-3), y0+4+rng.IntN(b.Dy()-y0-3))
			w, h := 8+rng.IntN(120), 8+rng.IntN(120)
			sx, sy := wholeSpans(r)
			z.resizePlanes(&got, m, r, sx, sy, w, h)
			var ry, rcb, rcr []uint8
			switch m := m.(type) {
			case *image.Gray:
				ry = planeRef(m.Pix, m.Stride, b.Dx(), b.Dy(), float64(r.Min.X), float64(r.Min.Y), float64(r.Max.X), float64(r.Max.Y), w, h)
			case *image.YCbCr:
				ry = planeRef(m.Y, m.YStride, b.Dx(), b.Dy(), float64(r.Min.X), float64(r.Min.Y), float64(r.Max.X), float64(r.Max.Y), w, h)
				hs, vs, _ := chromaShifts(m.SubsampleRatio)
				fx, fy := float64(int(1)<<hs), float64(int(1)<<vs)
				cw, ch := (b.Dx()+1<<hs-1)>>hs, (b.Dy()+1<<vs-1)>>vs
				box := func(p []uint8) []uint8 {
					return planeRef(p, m.CStride, cw, ch, float64(r.Min.X)/fx, float64(r.Min.Y)/fy, float64(r.Max.X)/fx, float64(r.Max.Y)/fy, w, h)
				}
				rcb, rcr = box(m.Cb), box(m.Cr)
			}
			worst, sum := 0, 0
			for i := range w * h {
				var want [3]uint8
				if rcb == nil {
					want = [3]uint8{ry[i], ry[i], ry[i]}
				} else {
					want[0], want[1], want[2] = color.YCbCrToRGB(ry[i], rcb[i], rcr[i])
				}
				p := got.Pix[(i/w)*got.Stride+3*(i%w):]
				for c := range 3 {
					d := absDiff(p[c], want[c])
					worst, sum = max(worst, d), sum+d
				}
			}
			if mean := float64(sum) / float64(3*w*h); worst > 3 || mean > 0.6 {
				t.Errorf("%s: crop %v -> %dx%d: max diff %d, mean %.2f against the exact planar reference", name, r, w, h, worst, mean)
			}
		}
	}
}

// TestResizeConverted: planes converted first are converted row by row as the resampler
// reaches them (resizeConverted); the pixels must be those of converting the whole crop
// and resizing it, on every chroma layout of the fixtures and the photos, crops shrunk
// and enlarged (both pass orders), with whole and fractional spans.
func TestResizeConverted(t *testing.T) {
	var d jpegFast
	var z, ref Resizer
	var up jpegUpsampler
	var got, want, rgb Image
	rng := newRand()
	var files []string
	for _, name := range sequentialFixtures(t) {
		files = append(files, "sequential/"+name+".jpg")
	}
	for _, name := range []string{"onestandsout-500x333-420.jpg", "ladybird-333x500-422.jpg"} {
		files = append(files, "photos/"+name)
	}
	orders := map[bool]int{}
	for _, f := range files {
		yc, ok := fastPlanes(t, &d, fixture(t, f), image.Rectangle{}).(*image.YCbCr)
		if !ok {
			continue
		}
		b := yc.Bounds()
		for trial := range 12 {
			x0, y0 := rng.IntN(b.Dx()-2), rng.IntN(b.Dy()-2)
			r := image.Rect(x0, y0, x0+2+rng.IntN(b.Dx()-x0-1), y0+2+rng.IntN(b.Dy()-y0-1))
			w, h := 1+rng.IntN(300), 1+rng.IntN(300)
			sx, sy := wholeSpans(r)
			if trial%3 == 2 { // what remains of a crop after DCT scaling
				sx = span{0.4 * rng.Float64(), float64(r.Dx()) - 0.8*rng.Float64()}
				sy = span{0.4 * rng.Float64(), float64(r.Dy()) - 0.8*rng.Float64()}
			}
			z.resizeConverted(&got, yc, r, sx, sy, w, h)
			up.convert(&rgb, yc, r)
			ref.resize(&want, &rgb, image.Rect(0, 0, r.Dx(), r.Dy()), sx, sy, w, h)
			xp, yp := ref.axisPlans(r.Dx(), r.Dy(), w, h, sx, sy)
			orders[verticalFirst(r.Dx(), w, h, xp, yp)]++
			if got.Width != w || got.Height != h || !bytes.Equal(got.Pix, want.Pix) {
				md, x, y, c := maxDiff(&got, &want)
				t.Fatalf("%s: crop %v (spans %v %v) -> %dx%d: channel %d of pixel (%d,%d) differs by %d from converting the crop first", f, r, sx, sy, w, h, c, x, y, md)
			}
		}
	}
	if orders[true] == 0 || orders[false] == 0 {
		t.Errorf("pass orders tried: %v, want both", orders)
	}
}

// TestResizeYCbCrAllocs checks that planar resampling allocates nothing once warm.
func TestResizeYCbCrAllocs(t *testing.T) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo(500, 375), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	var d jpegFast
	var z Resizer
	var dst Image
	m := fastPlanes(t, &d, buf.Bytes(), image.Rectangle{})
	r := image.Rect(60, 30, 460, 330)
	sx, sy := wholeSpans(r)
	z.resizeYCbCr(&dst, m, r, sx, sy, 224, 224)
	if n := testing.AllocsPerRun(20, func() { z.resizeYCbCr(&dst, m, r, sx, sy, 224, 224) }); n != 0 {
		t.Errorf("%v allocations per resize, want 0", n)
	}
	// A saturated photo's crop is converted first (resizeConverted).
	m = fastPlanes(t, &d, photoFixture(t, "onestandsout-500x333-420.jpg"), image.Rectangle{})
	r = image.Rect(40, 20, 460, 320)
	sx, sy = wholeSpans(r)
	if hs, vs, _ := chromaShifts(m.(*image.YCbCr).SubsampleRatio); !gamutExcess(m.(*image.YCbCr), r, hs, vs, gamutLimit) {
		t.Fatal("the saturated photo's crop is not converted first")
	}
	z.resizeYCbCr(&dst, m, r, sx, sy, 224, 224)
	if n := testing.AllocsPerRun(20, func() { z.resizeYCbCr(&dst, m, r, sx, sy, 224, 224) }); n != 0 {
		t.Errorf("%v allocations per resize converted first, want 0", n)
	}
}

// TestYCbCrRow checks the row conversion, with and without AVX2, against
// color.YCbCrToRGB exactly, over every value of each channel and random rows.
func TestYCbCrRow(t *testing.T) {
	have := useAVX2
	defer func(v bool) { useAVX2 = v }(useAVX2)
	rng := rand.New(rand.NewPCG(15, 16))
	for _, simd := range []bool{false, true} {
		if simd && !have {
			continue
		}
		useAVX2 = simd
		for n := 1; n < 1200; n += 1 + n/3 {
			y, cb, cr := make([]uint8, n), make([]uint8, n), make([]uint8, n)
			for i := range n {
				y[i], cb[i], cr[i] = uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))
				if n > 256 { // somewhere every value of each channel
					y[i], cb[i], cr[i] = uint8(i), uint8(i*7), uint8(255-i)
				}
			}
			d := make([]uint8, 3*n+4)
			ycbcrRow(d[:3*n], y, cb, cr)
			for i := range n {
				r, g, b := color.YCbCrToRGB(y[i], cb[i], cr[i])
				if d[3*i] != r || d[3*i+1] != g || d[3*i+2] != b {
					t.Fatalf("AVX2 %v, n %d, pixel %d (%d,%d,%d): %v, want %d %d %d", simd, n, i, y[i], cb[i], cr[i], d[3*i:3*i+3], r, g, b)
				}
			}
			if d[3*n] != 0 || d[3*n+1] != 0 {
				t.Fatalf("AVX2 %v, n %d: wrote past the row", simd, n)
			}
		}
	}
}

// TestPlanarOutOfGamut resamples real photos as planes, whole and cropped, on both JPEG
// backends, and compares with a full decode converted to RGB first and the same resize
// (what torchvision does): at least 45 dB. In a photo of saturated colours many pixels'
// YCbCr lie outside the RGB cube, and a decoder clamps each of them; resampling the planes
// first and converting at the output clamps only the averages, 42-43 dB off, so such an
// image is converted first (gamutExcess). Crops whose edges fall on MCU boundaries, at
// their own size, also check that the Go decoder inverse-transforms the chroma samples
// that upsampling reads beyond a crop: within 2 levels of libjpeg-turbo's full decode.
func TestPlanarOutOfGamut(t *testing.T) {
	full := turboDecoder(t, Options{})
	var rs Resizer
	for _, name := range []string{"onestandsout-500x333-420.jpg", "seeding-800x599-420.jpg", "ladybird-333x500-422.jpg"} {
		data := photoFixture(t, name)
		ref, err := full.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		W, H := ref.Width, ref.Height
		for _, backend := range []string{BackendTurbo, BackendGo} {
			for _, c := range []struct {
				r    image.Rectangle
				w, h int
				tol  int // the largest difference allowed, or 0 for none
			}{
				{image.Rect(0, 0, W, H), 0, 0, 0}, // Resize(256)
				{image.Rect(37, 21, W-3, 291), 224, 224, 0},
				{image.Rect(32, 48, 160, 160), 128, 112, 2},
				{image.Rect(W-130, 16, W-2, 97), 128, 81, 2},
			} {
				if !strings.HasPrefix(name, "onestandsout") {
					c.tol = 0 // resampled as planes: chroma is not upsampled as libjpeg does
				}
				t.Run(fmt.Sprintf("%s/%s/%v", name, backend, c.r), func(t *testing.T) {
					var d *Decoder
					var got *Image
					var err error
					if c.w == 0 {
						p := ResizePolicy{Mode: ResizeShorter, Size: 256}
						if backend == BackendGo {
							d = goDecoder(t, Options{Resize: p})
						} else {
							d = turboDecoder(t, Options{Resize: p})
						}
						c.w, c.h = p.OutputSize(W, H)
						got, err = d.Decode(nil, data)
					} else {
						if backend == BackendGo {
							d = goDecoder(t, Options{})
						} else {
							d = turboDecoder(t, Options{})
						}
						got, err = d.DecodeRegion(nil, data, c.r, c.w, c.h)
					}
					if err != nil {
						t.Fatal(err)
					}
					want, err := rs.Resize(new(Image), ref, c.r, c.w, c.h)
					if err != nil {
						t.Fatal(err)
					}
					_, psnr := stats(got, want)
					md, x, y, ch := maxDiff(got, want)
					t.Logf("PSNR %.1f dB, max difference %d", psnr, md)
					if psnr < 45 {
						t.Errorf("PSNR %.1f dB, want at least 45", psnr)
					}
					if c.tol > 0 && md > c.tol {
						t.Errorf("channel %d of pixel (%d,%d) differs by %d, want at most %d", ch, x, y, md, c.tol)
					}
				})
			}
		}
	}
}
