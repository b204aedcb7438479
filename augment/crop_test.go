package augment

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
	"github.com/disintegration/imaging"
)

// torchGetParams is a line-by-line transcription of torchvision's
// RandomResizedCrop.get_params (transforms.py), returning (i, j, h, w).
func torchGetParams(r *rand.Rand, height, width int, scale, ratio [2]float64) (i, j, h, w int) {
	area := float64(height * width)
	logRatio := [2]float64{math.Log(ratio[0]), math.Log(ratio[1])}
	for range 10 {
		targetArea := area * (scale[0] + (scale[1]-scale[0])*r.Float64())
		aspectRatio := math.Exp(logRatio[0] + (logRatio[1]-logRatio[0])*r.Float64())
		w := int(math.RoundToEven(math.Sqrt(targetArea * aspectRatio)))
		h := int(math.RoundToEven(math.Sqrt(targetArea / aspectRatio)))
		if 0 < w && w <= width && 0 < h && h <= height {
			i := r.IntN(height - h + 1) // torch.randint(0, height - h + 1)
			j := r.IntN(width - w + 1)
			return i, j, h, w
		}
	}
	inRatio := float64(width) / float64(height)
	if inRatio < min(ratio[0], ratio[1]) {
		w = width
		h = int(math.RoundToEven(float64(w) / min(ratio[0], ratio[1])))
	} else if inRatio > max(ratio[0], ratio[1]) {
		h = height
		w = int(math.RoundToEven(float64(h) * max(ratio[0], ratio[1])))
	} else {
		w, h = width, height
	}
	i = (height - h) / 2
	j = (width - w) / 2
	return i, j, h, w
}

// ksStatistic is the two-sample Kolmogorov–Smirnov statistic sup|F_a - F_b|, correct for
// samples with ties. It sorts a and b.
func ksStatistic(a, b []float64) float64 {
	slices.Sort(a)
	slices.Sort(b)
	var d float64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x := min(a[i], b[j])
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// TestRandomResizedCropParamsDistribution draws crops from Params and from the
// transcription of torchvision, on separate random streams, and compares the distributions
// of area fraction, aspect ratio and offsets with a two-sample KS test at significance
// 0.001. The seeds are fixed, so the test is deterministic.
func TestRandomResizedCropParamsDistribution(t *testing.T) {
	const n = 20000
	tests := []struct {
		w, h         int
		scale, ratio [2]float64
	}{
		{500, 375, DefaultScale, DefaultRatio},
		{224, 300, DefaultScale, DefaultRatio},
		{1000, 100, DefaultScale, DefaultRatio}, // the fallback in some draws
		{2000, 50, DefaultScale, DefaultRatio},  // the fallback in every draw
		{640, 480, [2]float64{0.25, 0.5}, [2]float64{0.5, 2}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d/scale=%v/ratio=%.3v", tt.w, tt.h, tt.scale, tt.ratio), func(t *testing.T) {
			op := &RandomResizedCrop{Width: 224, Height: 224, Scale: tt.scale, Ratio: tt.ratio}
			ours := rand.New(rand.NewPCG(11, uint64(tt.w)))
			theirs := rand.New(rand.NewPCG(12, uint64(tt.h)))
			var a, b [4][]float64
			add := func(s *[4][]float64, x0, y0, w, h int) {
				s[0] = append(s[0], float64(w*h)/float64(tt.w*tt.h))
				s[1] = append(s[1], float64(w)/float64(h))
				s[2] = append(s[2], float64(x0))
				s[3] = append(s[3], float64(y0))
			}
			for range n {
				r := op.Params(ours, tt.w, tt.h)
				if !r.In(image.Rect(0, 0, tt.w, tt.h)) || r.Empty() {
					t.Fatalf("crop %v outside the %dx%d image", r, tt.w, tt.h)
				}
				add(&a, r.Min.X, r.Min.Y, r.Dx(), r.Dy())
				i, j, h, w := torchGetParams(theirs, tt.h, tt.w, tt.scale, tt.ratio)
				add(&b, j, i, w, h)
			}
			crit := ksCritical(n, n)
			for k, name := range []string{"area fraction", "aspect ratio", "left", "top"} {
				if d := ksStatistic(a[k], b[k]); d > crit {
					t.Errorf("%s: KS statistic %.4f > critical %.4f", name, d, crit)
				}
			}
		})
	}
}

// TestRandomResizedCropParamsStream checks that Params consumes the random stream exactly
// as torchvision's get_params does: fed the same stream, both give the same crops.
func TestRandomResizedCropParamsStream(t *testing.T) {
	op := NewRandomResizedCrop(224, 224)
	for _, size := range [][2]int{{500, 375}, {1000, 100}, {37, 1000}} {
		ours := rand.New(rand.NewPCG(3, 4))
		theirs := rand.New(rand.NewPCG(3, 4))
		for k := range 2000 {
			r := op.Params(ours, size[0], size[1])
			i, j, h, w := torchGetParams(theirs, size[1], size[0], DefaultScale, DefaultRatio)
			if want := image.Rect(j, i, j+w, i+h); r != want {
				t.Fatalf("%v draw %d: Params = %v, torchvision = %v", size, k, r, want)
			}
		}
	}
}

func TestRandomResizedCropFallback(t *testing.T) {
	never := [2]float64{1.5, 2} // crops larger than the image never fit
	tests := []struct {
		name         string
		w, h         int
		scale, ratio [2]float64
		want         image.Rectangle
	}{
		{"wide", 2000, 50, DefaultScale, DefaultRatio, image.Rect(966, 0, 1033, 50)}, // w = round(50*4/3) = 67
		{"tall", 50, 2000, DefaultScale, DefaultRatio, image.Rect(0, 966, 50, 1033)}, // h = round(50/(3/4)) = 67
		{"whole", 100, 90, never, DefaultRatio, image.Rect(0, 0, 100, 90)},
		{"wide-clamped", 300, 100, never, DefaultRatio, image.Rect(83, 0, 216, 100)},
		{"half-to-even", 1000, 99, never, [2]float64{1, 1.5}, image.Rect(426, 0, 574, 99)},    // round(148.5) = 148
		{"half-to-even-tall", 97, 1000, never, [2]float64{2, 3}, image.Rect(0, 476, 97, 524)}, // round(48.5) = 48
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := &RandomResizedCrop{Width: 8, Height: 8, Scale: tt.scale, Ratio: tt.ratio}
			r := rand.New(rand.NewPCG(1, 2))
			for range 50 {
				if got := op.Params(r, tt.w, tt.h); got != tt.want {
					t.Fatalf("Params = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestRandomResizedCropValidate(t *testing.T) {
	for _, op := range []*RandomResizedCrop{
		{Width: 0, Height: 10},
		{Width: 10, Height: 10, Scale: [2]float64{0.5, 0.1}},
		{Width: 10, Height: 10, Ratio: [2]float64{0, 1}},
		{Width: 10, Height: 10, Ratio: [2]float64{2, 1}},
		{Width: 10, Height: 10, Scale: [2]float64{0.1, math.Inf(1)}},
	} {
		if _, err := op.Apply(seeded(0), photo(t, 0, 20, 20)); err == nil {
			t.Errorf("%v: no error", op)
		}
	}
	// Zero Scale and Ratio mean the defaults.
	if got, want := (&RandomResizedCrop{Width: 2, Height: 3}).String(), NewRandomResizedCrop(2, 3).String(); got != want {
		t.Errorf("zero value prints %q, want %q", got, want)
	}
}

// TestRandomResizedCropPixels compares the output with the crop resized by decode's
// Resizer (exact: the op must be one Resize of the Params rectangle) and with
// imaging.Crop + imaging.Resize(Linear), whose triangle filter differs from PIL's only in
// rounding and at the borders: mean absolute difference ≤ 0.5 levels (about 0.17 with
// decode's float64 reference kernel), none more than 3.
func TestRandomResizedCropPixels(t *testing.T) {
	src := photo(t, 1, 250, 180)
	ref := toNRGBA(src)
	for _, tt := range []struct{ w, h int }{{112, 112}, {64, 40}, {200, 150}} {
		for seed := range int64(2) {
			t.Run(fmt.Sprintf("%dx%d/seed=%d", tt.w, tt.h, seed), func(t *testing.T) {
				op := NewRandomResizedCrop(tt.w, tt.h)
				rect := op.Params(seeded(seed).Rand, src.Width, src.Height)
				got, err := op.Apply(seeded(seed), src)
				if err != nil {
					t.Fatal(err)
				}
				var z decode.Resizer
				want, err := z.Resize(&decode.Image{}, src, rect, tt.w, tt.h)
				if err != nil {
					t.Fatal(err)
				}
				if !equalImages(got, want) {
					t.Errorf("output differs from Resize of %v", rect)
				}
				im := fromNRGBA(imaging.Resize(imaging.Crop(ref, rect), tt.w, tt.h, imaging.Linear))
				mean, worst := pixelDiff(t, got, im)
				if mean > 0.5 || worst > 3 {
					t.Errorf("crop %v: abs diff vs imaging mean %.3f max %d, want ≤ 0.5 and ≤ 3", rect, mean, worst)
				}
				t.Logf("crop %v: mean abs diff vs imaging %.3f, max %d", rect, mean, worst)
			})
		}
	}
}

func TestResize(t *testing.T) {
	tests := []struct {
		op           *Resize
		w, h         int
		wantW, wantH int
	}{
		{NewResize(128), 250, 187, 171, 128}, // int(128*250/187) = int(171.12)
		{NewResize(128), 187, 250, 128, 171},
		{NewResize(100), 150, 150, 100, 100},
		{NewResize(100), 333, 999, 100, 300}, // 100*999/333 = 300 exactly
		{NewResize(7), 10, 23, 7, 16},        // int(16.1)
		{NewResizeTo(200, 100), 250, 187, 200, 100},
		{NewResize(187), 250, 187, 250, 187}, // already the size: returned as is
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%dx%d", tt.op, tt.w, tt.h), func(t *testing.T) {
			if w, h := tt.op.OutputSize(tt.w, tt.h); w != tt.wantW || h != tt.wantH {
				t.Fatalf("OutputSize = %dx%d, want %dx%d", w, h, tt.wantW, tt.wantH)
			}
			src := photo(t, 2, tt.w, tt.h)
			orig := clone(src)
			got, err := tt.op.Apply(seeded(0), src)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != tt.wantW || got.Height != tt.wantH {
				t.Fatalf("output %dx%d, want %dx%d", got.Width, got.Height, tt.wantW, tt.wantH)
			}
			if !equalImages(src, orig) {
				t.Fatal("Apply changed its source")
			}
			if tt.wantW == tt.w && tt.wantH == tt.h {
				if got != src {
					t.Error("same-size Resize did not return its source")
				}
				return
			}
			im := fromNRGBA(imaging.Resize(toNRGBA(src), tt.wantW, tt.wantH, imaging.Linear))
			mean, worst := pixelDiff(t, got, im)
			if mean > 0.5 || worst > 3 {
				t.Errorf("abs diff vs imaging mean %.3f max %d, want ≤ 0.5 and ≤ 3", mean, worst)
			}
			t.Logf("mean abs diff vs imaging %.3f, max %d", mean, worst)
		})
	}
	if _, err := (&Resize{}).Apply(seeded(0), photo(t, 0, 4, 4)); err == nil {
		t.Error("zero Resize: no error")
	}
}

// torchCenterCrop transcribes torchvision's F.center_crop on a PIL image: pad with zeros
// when the crop is larger, then crop at round((H-h)/2), round((W-w)/2).
func torchCenterCrop(src *decode.Image, cw, ch int) *decode.Image {
	img := src
	if cw > img.Width || ch > img.Height {
		var l, tp, r, b int
		if cw > img.Width {
			l, r = (cw-img.Width)/2, (cw-img.Width+1)/2
		}
		if ch > img.Height {
			tp, b = (ch-img.Height)/2, (ch-img.Height+1)/2
		}
		p := &decode.Image{}
		p.Reset(img.Width+l+r, img.Height+tp+b)
		clear(p.Pix)
		for y := range img.Height {
			copy(p.Row(y + tp)[3*l:], img.Row(y))
		}
		img = p
	}
	top := int(math.RoundToEven(float64(img.Height-ch) / 2.0))
	left := int(math.RoundToEven(float64(img.Width-cw) / 2.0))
	out := &decode.Image{}
	out.Reset(cw, ch)
	for y := range ch {
		copy(out.Row(y), img.Row(top + y)[3*left:3*(left+cw)])
	}
	return out
}

func TestCenterCrop(t *testing.T) {
	tests := []struct{ w, h, cw, ch int }{
		{500, 375, 224, 224}, // even differences: imaging agrees
		{256, 256, 224, 224},
		{10, 9, 4, 5},
		{9, 9, 2, 2}, // odd: round(3.5) = 4, imaging takes 3
		{6, 5, 3, 2}, // odd: round(1.5) = 2 on both sides
		{11, 11, 4, 4},
		{4, 4, 4, 4},     // same size: returned as is
		{4, 3, 9, 3},     // padded left 2, right 3
		{5, 2, 3, 8},     // padded top 3, bottom 3, cropped horizontally
		{2, 3, 7, 6},     // padded on both sides
		{100, 2, 10, 10}, // crop across and pad
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d-to-%dx%d", tt.w, tt.h, tt.cw, tt.ch), func(t *testing.T) {
			src := decodetest.WithStride(decodetest.Noise(uint64(tt.w*tt.h), tt.w, tt.h), 5)
			got, err := NewCenterCrop(tt.cw, tt.ch).Apply(seeded(0), src)
			if err != nil {
				t.Fatal(err)
			}
			if tt.w == tt.cw && tt.h == tt.ch && got != src {
				t.Error("same-size CenterCrop did not return its source")
			}
			if want := torchCenterCrop(src, tt.cw, tt.ch); !equalImages(got, want) {
				t.Errorf("differs from torchvision's center_crop")
			}
			if tt.cw <= tt.w && tt.ch <= tt.h && (tt.w-tt.cw)%2 == 0 && (tt.h-tt.ch)%2 == 0 {
				want := fromNRGBA(imaging.CropCenter(toNRGBA(src), tt.cw, tt.ch))
				if !equalImages(got, want) {
					t.Errorf("differs from imaging.CropCenter")
				}
			}
		})
	}
}
