package decode

import (
	"bytes"
	"image"
	"math/rand/v2"
	"testing"

	"github.com/disintegration/imaging"
)

// noiseImage returns a w×h image of smooth gradients plus noise, so that both flat areas
// and edges are exercised.
func noiseImage(rng *rand.Rand, w, h int) *Image {
	m := &Image{}
	m.Reset(w, h)
	for y := 0; y < h; y++ {
		row := m.Row(y)
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				v := (x*(c+1)*7 + y*(3-c)*5) % 256
				if rng.IntN(4) == 0 {
					v = rng.IntN(256)
				}
				row[3*x+c] = uint8(v)
			}
		}
	}
	return m
}

// withKernels runs f once with the assembly kernels (where the CPU has them) and once with
// the Go kernels.
func withKernels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	if saved {
		t.Run("avx2", f)
	}
	useAVX2 = false
	t.Run("go", f)
}

// maxDiff returns the largest per-channel difference between a and b and where it is.
func maxDiff(a, b *Image) (d, x, y, c int) {
	for yy := 0; yy < a.Height; yy++ {
		ra, rb := a.Row(yy), b.Row(yy)
		for i := range ra {
			if v := absInt(int(ra[i]) - int(rb[i])); v > d {
				d, x, y, c = v, i/3, yy, i%3
			}
		}
	}
	return d, x, y, c
}

func absInt(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func TestResizeMatchesReference(t *testing.T) {
	cases := []struct {
		name   string
		sw, sh int
		r      image.Rectangle // zero: whole image
		w, h   int
	}{
		{"identity", 37, 23, image.Rectangle{}, 37, 23},
		{"halve", 64, 48, image.Rectangle{}, 32, 24},
		{"shorter-256", 500, 375, image.Rectangle{}, 341, 256},
		{"crop-224", 500, 375, image.Rect(100, 50, 400, 300), 224, 224},
		{"upscale-crop", 500, 375, image.Rect(10, 20, 60, 57), 224, 224},
		{"one-pixel-src", 1, 1, image.Rectangle{}, 5, 3},
		{"one-pixel-dst", 40, 30, image.Rectangle{}, 1, 1},
		{"single-row", 100, 1, image.Rectangle{}, 30, 1},
		{"single-col", 1, 100, image.Rectangle{}, 1, 30},
		{"thin-to-wide", 3, 50, image.Rectangle{}, 40, 7},
		{"big-shrink", 640, 480, image.Rectangle{}, 9, 7},
		{"mixed", 300, 200, image.Rect(0, 0, 300, 200), 450, 100},
	}
	withKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var z Resizer
		var got, want Image
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				src := noiseImage(rng, tc.sw, tc.sh)
				r := tc.r
				if r.Empty() {
					r = image.Rect(0, 0, tc.sw, tc.sh)
				}
				if _, err := z.Resize(&got, src, r, tc.w, tc.h); err != nil {
					t.Fatal(err)
				}
				resizeRef(&want, src, r, tc.w, tc.h)
				if d, x, y, c := maxDiff(&got, &want); d > 1 {
					t.Errorf("off by %d at (%d,%d) channel %d: got %d, reference %.4f", d, x, y, c,
						got.Row(y)[3*x+c], refValue(src, r, tc.w, tc.h, x, y, c))
				}
			})
		}
	})
}

// TestResizeRandom compares with the reference over random sizes and crops, shrinking and
// enlarging (RandomResizedCrop enlarges small crops).
func TestResizeRandom(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 30
	}
	withKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		var z Resizer
		var got, want Image
		for i := 0; i < n; i++ {
			sw, sh := 1+rng.IntN(200), 1+rng.IntN(200)
			src := noiseImage(rng, sw, sh)
			x0, y0 := rng.IntN(sw), rng.IntN(sh)
			r := image.Rect(x0, y0, x0+1+rng.IntN(sw-x0), y0+1+rng.IntN(sh-y0))
			w, h := 1+rng.IntN(160), 1+rng.IntN(160)
			if _, err := z.Resize(&got, src, r, w, h); err != nil {
				t.Fatal(err)
			}
			resizeRef(&want, src, r, w, h)
			if d, x, y, c := maxDiff(&got, &want); d > 1 {
				t.Fatalf("%dx%d crop %v -> %dx%d: off by %d at (%d,%d) channel %d: got %d, reference %.4f",
					sw, sh, r, w, h, d, x, y, c, got.Row(y)[3*x+c], refValue(src, r, w, h, x, y, c))
			}
		}
	})
}

// TestResizeKernelsAgree checks that the assembly and Go kernels compute identical pixels.
func TestResizeKernelsAgree(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine")
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	rng := rand.New(rand.NewPCG(5, 6))
	var z Resizer
	var a, b Image
	for i := 0; i < 60; i++ {
		sw, sh := 1+rng.IntN(300), 1+rng.IntN(300)
		src := noiseImage(rng, sw, sh)
		x0, y0 := rng.IntN(sw), rng.IntN(sh)
		r := image.Rect(x0, y0, x0+1+rng.IntN(sw-x0), y0+1+rng.IntN(sh-y0))
		w, h := 1+rng.IntN(250), 1+rng.IntN(250)
		useAVX2 = true
		z.Resize(&a, src, r, w, h)
		useAVX2 = false
		z.Resize(&b, src, r, w, h)
		if d, x, y, c := maxDiff(&a, &b); d != 0 {
			t.Fatalf("%dx%d crop %v -> %dx%d: kernels differ by %d at (%d,%d) channel %d", sw, sh, r, w, h, d, x, y, c)
		}
	}
}

func TestResizeStride(t *testing.T) {
	// A source whose rows are padded, and a crop touching the last byte of the buffer.
	rng := rand.New(rand.NewPCG(7, 8))
	tight := noiseImage(rng, 50, 40)
	padded := &Image{Width: 50, Height: 40, Stride: 3*50 + 7}
	padded.Pix = make([]uint8, 39*padded.Stride+150)
	for y := 0; y < 40; y++ {
		copy(padded.Pix[y*padded.Stride:], tight.Row(y))
	}
	var z Resizer
	var a, b Image
	r := image.Rect(10, 5, 50, 40)
	for _, sz := range [][2]int{{20, 17}, {80, 70}} {
		z.Resize(&a, tight, r, sz[0], sz[1])
		z.Resize(&b, padded, r, sz[0], sz[1])
		if d, _, _, _ := maxDiff(&a, &b); d != 0 {
			t.Errorf("-> %v: padded rows change the result by %d", sz, d)
		}
	}
}

func TestResizeErrors(t *testing.T) {
	src := &Image{}
	src.Reset(10, 10)
	var z Resizer
	var dst Image
	for _, tc := range []struct {
		r    image.Rectangle
		w, h int
	}{
		{image.Rect(0, 0, 11, 10), 5, 5},
		{image.Rect(-1, 0, 10, 10), 5, 5},
		{image.Rect(3, 3, 3, 8), 5, 5},
		{image.Rect(0, 0, 10, 10), 0, 5},
		{image.Rect(0, 0, 10, 10), 5, -1},
	} {
		if _, err := z.Resize(&dst, src, tc.r, tc.w, tc.h); err == nil {
			t.Errorf("Resize(%v, %dx%d) succeeded", tc.r, tc.w, tc.h)
		}
	}
}

func TestResizeAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	src := noiseImage(rng, 500, 375)
	var z Resizer
	var dst Image
	for _, tc := range []struct {
		r    image.Rectangle
		w, h int
	}{
		{image.Rect(0, 0, 500, 375), 341, 256},
		{image.Rect(40, 30, 200, 190), 224, 224},
	} {
		z.Resize(&dst, src, tc.r, tc.w, tc.h)
		if n := testing.AllocsPerRun(10, func() { z.Resize(&dst, src, tc.r, tc.w, tc.h) }); n != 0 {
			t.Errorf("%v -> %dx%d: %v allocations per call after warm-up", tc.r, tc.w, tc.h, n)
		}
	}
	// A new shape reuses the memory of the evicted plans once they are big enough.
	i := 0
	n := testing.AllocsPerRun(20, func() {
		i++
		z.Resize(&dst, src, image.Rect(i, i, 300+i, 200+i), 224-i%3, 224-i%5)
	})
	if n != 0 {
		t.Errorf("changing crops: %v allocations per call", n)
	}
}

// benchResize measures resampling a sw×sh image's crop r to w×h.
func benchResize(b *testing.B, sw, sh int, r image.Rectangle, w, h int) {
	benchResizer(b, false, sw, sh, r, w, h)
}

// benchResizer is benchResize with Resizer.Exact set to exact.
func benchResizer(b *testing.B, exact bool, sw, sh int, r image.Rectangle, w, h int) {
	src := noiseImage(rand.New(rand.NewPCG(1, 1)), sw, sh)
	if r.Empty() {
		r = image.Rect(0, 0, sw, sh)
	}
	z := Resizer{Exact: exact}
	var dst Image
	b.SetBytes(int64(3 * r.Dx() * r.Dy()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		z.Resize(&dst, src, r, w, h)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

// benchImaging measures imaging.Resize(…, imaging.Linear), the same filter, for comparison.
func benchImaging(b *testing.B, sw, sh int, r image.Rectangle, w, h int) {
	src := image.NewNRGBA(image.Rect(0, 0, sw, sh))
	m := noiseImage(rand.New(rand.NewPCG(1, 1)), sw, sh)
	for i := 0; i < sw*sh; i++ {
		copy(src.Pix[4*i:], m.Pix[3*i:3*i+3])
		src.Pix[4*i+3] = 255
	}
	var img image.Image = src
	if !r.Empty() {
		img = src.SubImage(r)
	} else {
		r = src.Rect
	}
	b.SetBytes(int64(3 * r.Dx() * r.Dy()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		imaging.Resize(img, w, h, imaging.Linear)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

func BenchmarkResize(b *testing.B) {
	crop := image.Rect(100, 50, 400, 300)
	b.Run("500x375-crop-224", func(b *testing.B) { benchResize(b, 500, 375, crop, 224, 224) })
	b.Run("1920x1080-455x256", func(b *testing.B) { benchResize(b, 1920, 1080, image.Rectangle{}, 455, 256) })
	b.Run("1920x1080-455x256-go", func(b *testing.B) {
		defer func(v bool) { useAVX2 = v }(useAVX2)
		useAVX2 = false
		benchResize(b, 1920, 1080, image.Rectangle{}, 455, 256)
	})
	b.Run("imaging-500x375-crop-224", func(b *testing.B) { benchImaging(b, 500, 375, crop, 224, 224) })
	b.Run("imaging-1920x1080-455x256", func(b *testing.B) { benchImaging(b, 1920, 1080, image.Rectangle{}, 455, 256) })
}

// TestResizerCacheNeverStale resizes a stream of crops whose lengths repeat, so the weight
// cache both hits and evicts, and compares every result with a fresh Resizer's. A cache
// that evicted one axis's plan while computing the other's once made results depend on
// what the Resizer had done before.
func TestResizerCacheNeverStale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := &Image{}
	src.Reset(96, 80)
	for i := range src.Pix {
		src.Pix[i] = uint8(r.IntN(256))
	}
	var used Resizer
	var a, b Image
	lengths := []int{7, 13, 24, 40, 61}
	for i := 0; i < 3000; i++ {
		cw, ch := lengths[r.IntN(len(lengths))], lengths[r.IntN(len(lengths))]
		x0, y0 := r.IntN(96-cw+1), r.IntN(80-ch+1)
		rect := image.Rect(x0, y0, x0+cw, y0+ch)
		ow, oh := lengths[r.IntN(len(lengths))], lengths[r.IntN(len(lengths))]
		var fresh Resizer
		if _, err := fresh.Resize(&a, src, rect, ow, oh); err != nil {
			t.Fatal(err)
		}
		if _, err := used.Resize(&b, src, rect, ow, oh); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Pix, b.Pix) {
			t.Fatalf("step %d: %v -> %dx%d differs from a fresh Resizer's result", i, rect, ow, oh)
		}
	}
}
