package augment

import (
	"fmt"
	"math"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

func TestFlips(t *testing.T) {
	for _, size := range [][2]int{{1, 1}, {2, 3}, {7, 5}, {224, 224}, {600, 3}} {
		src := decodetest.WithStride(decodetest.Noise(3, size[0], size[1]), 4)
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			h := clone(src)
			FlipHorizontal(h)
			v := clone(src)
			FlipVertical(v)
			for y := range src.Height {
				for x := range src.Width {
					for c := range 3 {
						s := src.Row(y)[3*x+c]
						if got := h.Row(y)[3*(src.Width-1-x)+c]; got != s {
							t.Fatalf("horizontal: (%d,%d,%d) = %d, want %d", src.Width-1-x, y, c, got, s)
						}
						if got := v.Row(src.Height - 1 - y)[3*x+c]; got != s {
							t.Fatalf("vertical: (%d,%d,%d) = %d, want %d", x, src.Height-1-y, c, got, s)
						}
					}
				}
			}
			// In place, within the rows: the stride padding is untouched.
			s := clone(src)
			s.Pix, s.Stride = append([]byte(nil), src.Pix...), src.Stride
			FlipHorizontal(s)
			FlipVertical(s)
			for y := range s.Height {
				for _, b := range s.Pix[y*s.Stride+3*s.Width : min(len(s.Pix), (y+1)*s.Stride)] {
					if b != 0xA5 {
						t.Fatal("flip wrote into the stride padding")
					}
				}
			}
		})
	}
}

func TestRandomFlipProbability(t *testing.T) {
	src := decodetest.Noise(1, 5, 4)
	for _, tt := range []struct {
		op   Op
		flip func(*decode.Image)
	}{
		{NewRandomHorizontalFlip(0.3), FlipHorizontal},
		{NewRandomVerticalFlip(0.3), FlipVertical},
		{NewRandomGrayscale(0.3), Grayscale},
	} {
		t.Run(tt.op.String(), func(t *testing.T) {
			done := clone(src)
			tt.flip(done)
			n := 0
			const runs = 4000
			for i := range int64(runs) {
				c := seeded(i)
				want := src
				if c.Rand.Float64() < 0.3 { // the op's one draw
					want, n = done, n+1
				}
				m := clone(src)
				got, err := tt.op.Apply(seeded(i), m)
				if err != nil || got != m {
					t.Fatalf("Apply = %p, %v; want its source in place", got, err)
				}
				if !equalImages(got, want) {
					t.Fatalf("seed %d: wrong output", i)
				}
			}
			if n < runs*27/100 || n > runs*33/100 {
				t.Errorf("applied %d of %d times, want about 30%%", n, runs)
			}
		})
	}
}

// Float64 versions of PIL's enhancers, from their definitions (Image.blend clips and
// truncates; luma is 0.299R + 0.587G + 0.114B). The implementation works in float32 and
// PIL's fixed-point luma, so results may differ by one level.
func refBlend(deg, x, f float64) int {
	v := deg + f*(x-deg)
	return int(math.Max(0, math.Min(255, math.Trunc(v))))
}

func refLuma(p []uint8) float64 {
	return 0.299*float64(p[0]) + 0.587*float64(p[1]) + 0.114*float64(p[2])
}

func TestAdjustAgainstFloat64(t *testing.T) {
	src := decodetest.WithStride(photo(t, 3, 97, 61), 2)
	noisy := decodetest.Noise(5, 64, 64)
	factors := []float64{0, 0.37, 0.6, 1, 1.2345, 1.4, 2.5}
	type adjust struct {
		name string
		fn   func(*decode.Image, float64)
		ref  func(m *decode.Image, f float64, y, i int) int
	}
	meanLuma := func(m *decode.Image) float64 {
		var s float64
		for y := range m.Height {
			row := m.Row(y)
			for i := 0; i < len(row); i += 3 {
				s += refLuma(row[i : i+3])
			}
		}
		return math.Floor(s/float64(m.Width*m.Height) + 0.5)
	}
	var mean float64 // of the current source, set below
	for _, a := range []adjust{
		{"brightness", AdjustBrightness, func(m *decode.Image, f float64, y, i int) int {
			return refBlend(0, float64(m.Row(y)[i]), f)
		}},
		{"contrast", AdjustContrast, func(m *decode.Image, f float64, y, i int) int {
			return refBlend(mean, float64(m.Row(y)[i]), f)
		}},
		{"saturation", AdjustSaturation, func(m *decode.Image, f float64, y, i int) int {
			return refBlend(refLuma(m.Row(y)[i/3*3:]), float64(m.Row(y)[i]), f)
		}},
		{"grayscale", func(m *decode.Image, _ float64) { Grayscale(m) }, func(m *decode.Image, f float64, y, i int) int {
			return int(math.Round(refLuma(m.Row(y)[i/3*3:])))
		}},
	} {
		for _, img := range []*decode.Image{src, noisy} {
			for _, f := range factors {
				t.Run(fmt.Sprintf("%s/%dx%d/%g", a.name, img.Width, img.Height, f), func(t *testing.T) {
					mean = meanLuma(img)
					m := clone(img)
					a.fn(m, f)
					ff := float64(float32(f)) // PIL's alpha is a C float
					exact := 0
					for y := range m.Height {
						for i, got := range m.Row(y) {
							want := a.ref(img, ff, y, i)
							if d := int(got) - want; d < -1 || d > 1 {
								t.Fatalf("value %d of row %d: got %d, float64 formula %d", i, y, got, want)
							} else if d == 0 {
								exact++
							}
						}
					}
					t.Logf("%.1f%% of values equal the float64 formula", 100*float64(exact)/float64(3*m.Width*m.Height))
				})
			}
		}
	}
}

// TestBlendFloat32 checks the one-value blend against a transcription of ImagingBlend
// (Blend.c) where every C float operation is rounded to float32.
func TestBlendFloat32(t *testing.T) {
	for _, alpha := range []float32{0, 0.1, 0.5, 0.6000000238, 1, 1.3, 1.4, 3} {
		for in1 := range 256 {
			for in2 := range 256 {
				prod := float64(float32(float64(alpha) * float64(in2-in1)))
				temp := float32(float64(in1) + prod)
				want := uint8(0)
				switch {
				case temp >= 255:
					want = 255
				case temp > 0:
					want = uint8(math.Trunc(float64(temp)))
				}
				if got := blend(in1, in2, alpha); got != want {
					t.Fatalf("blend(%d, %d, %v) = %d, want %d", in1, in2, alpha, got, want)
				}
			}
		}
		// AdjustSaturation's per-pixel path is the same blend with the pixel's luma.
		src := decodetest.Noise(uint64(alpha*10), 64, 64)
		m := clone(src)
		AdjustSaturation(m, float64(alpha))
		for i := 0; i < len(m.Pix); i += 3 {
			p := src.Pix[i : i+3]
			l := int(luma(p[0], p[1], p[2]))
			for c := range 3 {
				if want := blend(l, int(p[c]), alpha); m.Pix[i+c] != want {
					t.Fatalf("saturation %v of %v: channel %d is %d, want %d", alpha, p, c, m.Pix[i+c], want)
				}
			}
		}
	}
}

// pilRGBToHSV and pilHSVToRGB transcribe Pillow's rgb2hsv and hsv2rgb
// (libImaging/Convert.c) in float64, rounding to float32 wherever C stores into a float
// variable or multiplies two floats. This matters: H is truncated to 8 bits, so a single
// rounding difference moves it a step, which moves RGB by up to 6 levels. PIL's pure green
// (0, 255, 0), for example, has H = 85 only because h = 1/3 is stored as a float.
func pilRGBToHSV(r, g, b uint8) (uint8, uint8, uint8) {
	f32 := func(x float64) float64 { return float64(float32(x)) }
	maxc := max(r, g, b)
	minc := min(r, g, b)
	if maxc == minc {
		return 0, 0, maxc
	}
	cr := float64(maxc - minc)
	s := f32(cr / float64(maxc))
	rc := f32(float64(maxc-r) / cr)
	gc := f32(float64(maxc-g) / cr)
	bc := f32(float64(maxc-b) / cr)
	var h float64
	if r == maxc {
		h = f32(bc - gc)
	} else if g == maxc {
		h = f32(2.0 + rc - bc)
	} else {
		h = f32(4.0 + gc - rc)
	}
	h = f32(math.Mod(h/6.0+1.0, 1.0))
	return uint8(clip8(int(h * 255.0))), uint8(clip8(int(s * 255.0))), maxc
}

func pilHSVToRGB(h, s, v uint8) (uint8, uint8, uint8) {
	f32 := func(x float64) float64 { return float64(float32(x)) }
	if s == 0 {
		return v, v, v
	}
	i := int(math.Floor(float64(h) * 6.0 / 255.0))
	f := f32(float64(h)*6.0/255.0 - float64(i))
	fs := f32(float64(s) / 255.0)
	round := func(x float64) uint8 { return clip8(int(math.Round(x))) } // C round: half away from zero
	p := round(float64(v) * (1.0 - fs))
	q := round(float64(v) * (1.0 - f32(fs*f)))
	t := round(float64(v) * (1.0 - fs*(1.0-f)))
	switch i % 6 {
	case 0:
		return v, t, p
	case 1:
		return q, v, p
	case 2:
		return p, v, t
	case 3:
		return p, q, v
	case 4:
		return t, p, v
	}
	return v, p, q
}

func TestHSVRoundTrip(t *testing.T) {
	check := func(r, g, b uint8) {
		h, s, v := hsvTab().rgbToHSV(r, g, b)
		if wh, ws, wv := pilRGBToHSV(r, g, b); h != wh || s != ws || v != wv {
			t.Fatalf("rgbToHSV(%d,%d,%d) = %d,%d,%d, want %d,%d,%d", r, g, b, h, s, v, wh, ws, wv)
		}
	}
	// Hue depends only on how far the channels are below the maximum, so the colours with
	// a channel at 255 reach every entry of the hue table; saturation depends on the
	// maximum and the minimum, so the colours (max, min, min) reach every entry of its table.
	for x := range 256 {
		for y := range 256 {
			check(255, uint8(x), uint8(y))
			check(uint8(x), 255, uint8(y))
			check(uint8(x), uint8(y), 255)
			check(max(uint8(x), uint8(y)), min(uint8(x), uint8(y)), min(uint8(x), uint8(y)))
		}
	}
	// And a grid of everything else.
	var levels []uint8
	for v := 0; v < 256; v += 7 {
		levels = append(levels, uint8(v))
	}
	for _, r := range levels {
		for _, g := range levels {
			for _, b := range levels {
				check(r, g, b)
			}
		}
	}
	for h := range 256 {
		for _, s := range levels {
			for _, v := range levels {
				r, g, b := hsvToRGB(uint8(h), s, v)
				if wr, wg, wb := pilHSVToRGB(uint8(h), s, v); r != wr || g != wg || b != wb {
					t.Fatalf("hsvToRGB(%d,%d,%d) = %d,%d,%d, want %d,%d,%d", h, s, v, r, g, b, wr, wg, wb)
				}
			}
		}
	}
	for _, tt := range []struct{ rgb, hsv [3]uint8 }{
		{[3]uint8{255, 0, 0}, [3]uint8{0, 255, 255}},
		{[3]uint8{0, 255, 0}, [3]uint8{85, 255, 255}},
		{[3]uint8{0, 0, 255}, [3]uint8{170, 255, 255}},
		{[3]uint8{128, 128, 128}, [3]uint8{0, 0, 128}},
		{[3]uint8{255, 254, 254}, [3]uint8{0, 1, 255}},
	} {
		if h, s, v := hsvTab().rgbToHSV(tt.rgb[0], tt.rgb[1], tt.rgb[2]); [3]uint8{h, s, v} != tt.hsv {
			t.Errorf("rgbToHSV%v = %d,%d,%d, want %v", tt.rgb, h, s, v, tt.hsv)
		}
	}
}

func TestAdjustHue(t *testing.T) {
	tests := []struct {
		factor float64
		shift  uint8
	}{
		{0, 0}, {0.1, 25}, {-0.1, 231}, {1.0 / 3, 85}, {0.5, 127}, {-0.5, 129}, {0.002, 0},
	}
	src := decodetest.Noise(9, 40, 30)
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.factor), func(t *testing.T) {
			m := decodetest.WithStride(src, 3)
			AdjustHue(m, tt.factor)
			for y := range src.Height {
				for x := range src.Width {
					p := src.Row(y)[3*x:]
					h, s, v := pilRGBToHSV(p[0], p[1], p[2])
					r, g, b := pilHSVToRGB(h+tt.shift, s, v)
					if q := m.Row(y)[3*x:]; q[0] != r || q[1] != g || q[2] != b {
						t.Fatalf("pixel (%d,%d) %v: got %v, want [%d %d %d]", x, y, p[:3], q[:3], r, g, b)
					}
				}
			}
		})
	}
	// Pure red shifted by a third of the circle is pure green.
	m := &decode.Image{Pix: []uint8{255, 0, 0}, Width: 1, Height: 1, Stride: 3}
	AdjustHue(m, 1.0/3)
	if string(m.Pix) != "\x00\xff\x00" {
		t.Errorf("red shifted by 1/3 = %v, want [0 255 0]", m.Pix)
	}
}

// TestColorJitterOrder replays ColorJitter's draws (a permutation of the four adjustments,
// then the factors of the set ones) and checks that it applies them in that order.
func TestColorJitterOrder(t *testing.T) {
	src := photo(t, 4, 48, 40)
	ops := []*ColorJitter{
		NewColorJitter(0.4, 0.4, 0.4, 0.1),
		NewColorJitter(0.4, 0, 0.4, 0),
		NewColorJitter(0, 0.8, 0, 0.5),
		NewColorJitter(1.5, 0, 0, 0), // the lower bound clips at 0
		{},
	}
	for _, op := range ops {
		t.Run(op.String(), func(t *testing.T) {
			for seed := range int64(30) {
				c := seeded(seed)
				order := [4]int{0, 1, 2, 3}
				for i := 3; i > 0; i-- {
					j := c.Rand.IntN(i + 1)
					order[i], order[j] = order[j], order[i]
				}
				var f [4]float64
				for k, v := range []float64{op.Brightness, op.Contrast, op.Saturation} {
					if v > 0 {
						lo := math.Max(0, 1-v)
						f[k] = float64(float32(lo + (1+v-lo)*c.Rand.Float64()))
					}
				}
				if op.Hue > 0 {
					f[3] = float64(float32(-op.Hue + 2*op.Hue*c.Rand.Float64()))
				}
				want := clone(src)
				for _, k := range order {
					switch {
					case k == 0 && op.Brightness > 0:
						AdjustBrightness(want, f[0])
					case k == 1 && op.Contrast > 0:
						AdjustContrast(want, f[1])
					case k == 2 && op.Saturation > 0:
						AdjustSaturation(want, f[2])
					case k == 3 && op.Hue > 0:
						AdjustHue(want, f[3])
					}
				}
				got, err := op.Apply(seeded(seed), clone(src))
				if err != nil {
					t.Fatal(err)
				}
				if !equalImages(got, want) {
					t.Fatalf("seed %d: output differs from the replayed order %v with factors %v", seed, order, f)
				}
			}
		})
	}
}

func TestColorJitterValidate(t *testing.T) {
	for _, op := range []*ColorJitter{
		{Brightness: -0.1}, {Contrast: math.NaN()}, {Saturation: math.Inf(1)}, {Hue: 0.6}, {Hue: -0.1},
	} {
		if _, err := op.Apply(seeded(0), decodetest.Noise(1, 2, 2)); err == nil {
			t.Errorf("%v: no error", op)
		}
	}
}
