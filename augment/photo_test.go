package augment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// The references below transcribe Pillow's Python (ImageOps) and C (Filter.c, Blend.c)
// step by step, in the most direct form: lists built as Python builds them, per-pixel
// loops over a copy of the input, every C float operation rounded to float32.

// pilPoint maps every channel c value v of m through lut[c*256+v], as Image.point does
// with a 768-entry list (clipping entries to [0, 255] as getlist does).
func pilPoint(m *decode.Image, lut []int) *decode.Image {
	if len(lut) == 256 {
		lut = append(append(append([]int(nil), lut...), lut...), lut...)
	}
	out := clone(m)
	for y := range out.Height {
		row := out.Row(y)
		for i, v := range row {
			row[i] = uint8(min(max(lut[(i%3)*256+int(v)], 0), 255))
		}
	}
	return out
}

// pilHistogram is Image.histogram() of an RGB image: 768 counts.
func pilHistogram(m *decode.Image) []int {
	h := make([]int, 768)
	for y := range m.Height {
		for i, v := range m.Row(y) {
			h[(i%3)*256+int(v)]++
		}
	}
	return h
}

func refSolarize(m *decode.Image, threshold float64) *decode.Image {
	var lut []int
	for i := range 256 {
		if float64(i) < threshold {
			lut = append(lut, i)
		} else {
			lut = append(lut, 255-i)
		}
	}
	return pilPoint(m, lut)
}

func refPosterize(m *decode.Image, bits int) *decode.Image {
	mask := ^(1<<(8-bits) - 1)
	var lut []int
	for i := range 256 {
		lut = append(lut, i&mask)
	}
	return pilPoint(m, lut)
}

func refInvert(m *decode.Image) *decode.Image {
	var lut []int
	for i := 255; i >= 0; i-- {
		lut = append(lut, i)
	}
	return pilPoint(m, lut)
}

func refAutocontrast(m *decode.Image) *decode.Image {
	histogram := pilHistogram(m)
	var lut []int
	for layer := 0; layer < len(histogram); layer += 256 {
		h := histogram[layer : layer+256]
		lo, hi := 0, 255
		for lo = 0; lo < 256; lo++ {
			if h[lo] != 0 {
				break
			}
		}
		for hi = 255; hi >= 0; hi-- {
			if h[hi] != 0 {
				break
			}
		}
		if hi <= lo {
			for i := range 256 {
				lut = append(lut, i)
			}
			continue
		}
		scale := 255.0 / float64(hi-lo)
		offset := -float64(lo) * scale
		for ix := range 256 {
			v := int(math.Trunc(float64(float64(ix)*scale) + offset))
			lut = append(lut, min(max(v, 0), 255))
		}
	}
	return pilPoint(m, lut)
}

func refEqualize(m *decode.Image) *decode.Image {
	h := pilHistogram(m)
	var lut []int
	for b := 0; b < len(h); b += 256 {
		var histo []int
		for _, f := range h[b : b+256] {
			if f != 0 {
				histo = append(histo, f)
			}
		}
		identity := func() {
			for i := range 256 {
				lut = append(lut, i)
			}
		}
		if len(histo) <= 1 {
			identity()
			continue
		}
		sum := 0
		for _, f := range histo {
			sum += f
		}
		step := (sum - histo[len(histo)-1]) / 255
		if step == 0 {
			identity()
			continue
		}
		n := step / 2
		for i := range 256 {
			lut = append(lut, n/step)
			n += h[i+b]
		}
	}
	return pilPoint(m, lut)
}

// refSharpness is ImageEnhance.Sharpness: ImagingFilter3x3 with SMOOTH (kernel divided by
// 13 in float32, offset 0.5, borders copied), then ImagingBlend(smoothed, m, factor).
func refSharpness(m *decode.Image, factor float64) *decode.Image {
	f32 := func(x float64) float64 { return float64(float32(x)) }
	kern := [9]float64{}
	for i, k := range [9]float64{1, 1, 1, 1, 5, 1, 1, 1, 1} {
		kern[i] = f32(k / 13) // float32(k)/float32(13), correctly rounded either way
	}
	smooth := clone(m)
	if m.Width >= 3 && m.Height >= 3 {
		for y := 1; y < m.Height-1; y++ {
			for x := 1; x < m.Width-1; x++ {
				for c := range 3 {
					at := func(dy, dx int) float64 { return float64(m.Row(y + dy)[3*(x+dx)+c]) }
					k1x3 := func(dy int, k []float64) float64 {
						return f32(f32(f32(at(dy, -1)*k[0])+f32(at(dy, 0)*k[1])) + f32(at(dy, 1)*k[2]))
					}
					ss := f32(0.5)
					ss = f32(ss + k1x3(1, kern[0:3]))
					ss = f32(ss + k1x3(0, kern[3:6]))
					ss = f32(ss + k1x3(-1, kern[6:9]))
					smooth.Row(y)[3*x+c] = uint8(math.Min(math.Max(ss, 0), 255))
				}
			}
		}
	}
	out := clone(m)
	alpha := f32(factor)
	for y := range out.Height {
		for i := range out.Row(y) {
			in1, in2 := float64(smooth.Row(y)[i]), float64(m.Row(y)[i])
			v := f32(in1 + f32(alpha*(in2-in1)))
			out.Row(y)[i] = uint8(math.Min(math.Max(v, 0), 255))
		}
	}
	return out
}

// testImages returns photos and noise of odd sizes, some with stride padding, and a few
// degenerate ones (constant, two-valued, tiny).
func testImages(t *testing.T) map[string]*decode.Image {
	flat := decodetest.Noise(1, 9, 7)
	for i := range flat.Pix {
		flat.Pix[i] = 77
	}
	two := decodetest.Noise(2, 16, 16)
	for i := range two.Pix {
		two.Pix[i] = 100 + 50*(two.Pix[i]&1)
	}
	low := photo(t, 4, 41, 29) // a narrow range, where equalize's step is small
	for i := range low.Pix {
		low.Pix[i] = 60 + low.Pix[i]/16
	}
	return map[string]*decode.Image{
		"photo":  photo(t, 1, 97, 61),
		"stride": decodetest.WithStride(photo(t, 2, 50, 33), 5),
		"noise":  decodetest.Noise(3, 64, 48),
		"flat":   flat,
		"two":    two,
		"low":    low,
		"small":  decodetest.Noise(5, 2, 3),
		"1x1":    decodetest.Noise(6, 1, 1),
		"3x3":    decodetest.Noise(7, 3, 3),
		"empty":  {},
	}
}

func TestPhotometricAgainstPIL(t *testing.T) {
	type fn struct {
		name string
		got  func(*decode.Image)
		want func(*decode.Image) *decode.Image
	}
	var fns []fn
	for _, th := range []float64{-1, 0, 1, 100, 128, 127.5, 246.5, 255, 256} {
		fns = append(fns, fn{fmt.Sprintf("Solarize(%g)", th),
			func(m *decode.Image) { Solarize(m, th) },
			func(m *decode.Image) *decode.Image { return refSolarize(m, th) }})
	}
	for bits := range 9 {
		fns = append(fns, fn{fmt.Sprintf("Posterize(%d)", bits),
			func(m *decode.Image) { Posterize(m, bits) },
			func(m *decode.Image) *decode.Image { return refPosterize(m, bits) }})
	}
	fns = append(fns,
		fn{"Invert", Invert, refInvert},
		fn{"Autocontrast", Autocontrast, refAutocontrast},
		fn{"Equalize", Equalize, refEqualize})
	for _, f := range []float64{0, 0.1, 0.5, 1, 1.3, 1.9, 2, 5} {
		fns = append(fns, fn{fmt.Sprintf("AdjustSharpness(%g)", f),
			func(m *decode.Image) { AdjustSharpness(m, f) },
			func(m *decode.Image) *decode.Image { return refSharpness(m, f) }})
	}
	for name, img := range testImages(t) {
		for _, f := range fns {
			t.Run(f.name+"/"+name, func(t *testing.T) {
				want := f.want(img)
				got := clone(img)
				if img.Stride != 3*img.Width { // keep the padding, to see it untouched
					got.Pix, got.Stride = append([]byte(nil), img.Pix...), img.Stride
				}
				f.got(got)
				if !equalImages(got, want) {
					mean, worst := pixelDiff(t, got, want)
					t.Fatalf("differs from PIL's arithmetic: mean %.3f, max %d", mean, worst)
				}
				for y := range got.Height {
					row := got.Pix[y*got.Stride+3*got.Width : min(len(got.Pix), (y+1)*got.Stride)]
					if strings.Trim(string(row), "\xa5") != "" {
						t.Fatal("wrote into the stride padding")
					}
				}
			})
		}
	}
}

// TestPhotometricByHand checks values worked out by hand, so that a shared mistake in a
// function and its reference would show.
func TestPhotometricByHand(t *testing.T) {
	px := func(vals ...uint8) *decode.Image { // a 1-row image of grey pixels
		m := &decode.Image{}
		m.Reset(len(vals), 1)
		for i, v := range vals {
			m.Pix[3*i], m.Pix[3*i+1], m.Pix[3*i+2] = v, v, v
		}
		return m
	}
	for _, tt := range []struct {
		name     string
		fn       func(*decode.Image)
		in, want []uint8
	}{
		{"solarize 128", func(m *decode.Image) { Solarize(m, 128) }, []uint8{0, 127, 128, 255}, []uint8{0, 127, 127, 0}},
		{"solarize 127.5", func(m *decode.Image) { Solarize(m, 127.5) }, []uint8{127, 128}, []uint8{127, 127}},
		{"posterize 2", func(m *decode.Image) { Posterize(m, 2) }, []uint8{0, 63, 64, 191, 255}, []uint8{0, 0, 64, 128, 192}},
		{"posterize 0", func(m *decode.Image) { Posterize(m, 0) }, []uint8{5, 255}, []uint8{0, 0}},
		{"invert", Invert, []uint8{0, 10, 255}, []uint8{255, 245, 0}},
		// lo 10, hi 250: scale 255/240 = 1.0625, offset -10.625.
		{"autocontrast", Autocontrast, []uint8{10, 20, 130, 250}, []uint8{0, 10, 127, 255}},
		{"autocontrast flat", Autocontrast, []uint8{9, 9}, []uint8{9, 9}},
		// 300 pixels: 100 each of 0, 1, 2, and step = (300-100)/255 = 0: unchanged.
		{"equalize small", Equalize, append(append(rep(0, 100), rep(1, 100)...), rep(2, 100)...),
			append(append(rep(0, 100), rep(1, 100)...), rep(2, 100)...)},
		// 1020 pixels: 510 of 10, 510 of 20. step = 510/255 = 2, n starts at 1:
		// lut[10] = 1/2 = 0, lut[20] = (1+510)/2 = 255.
		{"equalize two", Equalize, append(rep(10, 510), rep(20, 510)...), append(rep(0, 510), rep(255, 510)...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := px(tt.in...)
			tt.fn(m)
			for i, w := range tt.want {
				if got := m.Pix[3*i : 3*i+3]; got[0] != w || got[1] != w || got[2] != w {
					t.Fatalf("pixel %d (%d) = %v, want %d", i, tt.in[i], got, w)
				}
			}
		})
	}
	// Sharpness of a single bright pixel in a dark 3x3 image: the smoothed centre is
	// 130*5/13 = 50 (+0.5, truncated), and factor 2 gives 50 + 2*(130-50) = 210.
	m := &decode.Image{}
	m.Reset(3, 3)
	copy(m.Pix[12:15], []uint8{130, 130, 130})
	AdjustSharpness(m, 2)
	if got := m.Pix[12]; got != 210 {
		t.Errorf("sharpened centre = %d, want 210", got)
	}
	if m.Pix[0] != 0 {
		t.Errorf("corner = %d, want 0 (the border is not filtered)", m.Pix[0])
	}
}

func rep(v uint8, n int) []uint8 {
	s := make([]uint8, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestRandomPhotometric(t *testing.T) {
	src := photo(t, 9, 31, 23)
	for _, tt := range []struct {
		op Op
		fn func(*decode.Image)
	}{
		{NewRandomSolarize(100, 0.3), func(m *decode.Image) { Solarize(m, 100) }},
		{NewRandomPosterize(3, 0.3), func(m *decode.Image) { Posterize(m, 3) }},
		{NewRandomAutocontrast(0.3), Autocontrast},
		{NewRandomEqualize(0.3), Equalize},
	} {
		t.Run(tt.op.String(), func(t *testing.T) {
			done := clone(src)
			tt.fn(done)
			if equalImages(done, src) {
				t.Fatal("the op leaves the test image as it is")
			}
			n := 0
			const runs = 4000
			for i := range int64(runs) {
				want := src
				if seeded(i).Rand.Float64() < 0.3 { // the op's one draw
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

func TestPhotoValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		op   Op
		want string // "" for valid
	}{
		{NewRandomSolarize(128, 0.5), ""},
		{NewRandomSolarize(-5, 1), ""},
		{NewRandomSolarize(nan, 0.5), "augment: RandomSolarize: Threshold NaN must be finite"},
		{NewRandomSolarize(inf, 0.5), "augment: RandomSolarize: Threshold +Inf must be finite"},
		{NewRandomSolarize(128, 1.5), "augment: RandomSolarize: P 1.5 not in [0, 1]"},
		{NewRandomPosterize(0, 0.5), ""},
		{NewRandomPosterize(8, 0.5), ""},
		{NewRandomPosterize(9, 0.5), "augment: RandomPosterize: Bits 9 not in [0, 8]"},
		{NewRandomPosterize(-1, 0.5), "augment: RandomPosterize: Bits -1 not in [0, 8]"},
		{NewRandomPosterize(4, -0.5), "augment: RandomPosterize: P -0.5 not in [0, 1]"},
		{NewRandomAutocontrast(0.5), ""},
		{NewRandomAutocontrast(nan), "augment: RandomAutocontrast: P NaN not in [0, 1]"},
		{NewRandomEqualize(1), ""},
		{NewRandomEqualize(2), "augment: RandomEqualize: P 2 not in [0, 1]"},
		{NewGaussianBlur(3, 0.1, 2), ""},
		{&GaussianBlur{KernelWidth: 5, KernelHeight: 1}, ""}, // zero Sigma: the default
		{NewGaussianBlur(4, 0.1, 2), "augment: GaussianBlur: KernelWidth 4 must be odd and positive"},
		{&GaussianBlur{KernelWidth: 3, KernelHeight: -3}, "augment: GaussianBlur: KernelHeight -3 must be odd and positive"},
		{&GaussianBlur{KernelWidth: 3}, "augment: GaussianBlur: KernelHeight 0 must be odd and positive"},
		{NewGaussianBlur(3, 0, 2), "augment: GaussianBlur: Sigma [0 2] must be finite, positive and ascending"},
		{NewGaussianBlur(3, 2, 1), "augment: GaussianBlur: Sigma [2 1] must be"},
		{NewGaussianBlur(3, 1, inf), "augment: GaussianBlur: Sigma [1 +Inf] must be"},
		{NewGaussianBlur(3, nan, 1), "augment: GaussianBlur: Sigma [NaN 1] must be"},
	} {
		t.Run(tt.op.String(), func(t *testing.T) {
			err := tt.op.(Validator).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if w, h := tt.op.(Sizer).OutputSize(7, 5); w != 7 || h != 5 {
					t.Errorf("OutputSize(7, 5) = %d, %d", w, h)
				}
				out, err := tt.op.Apply(seeded(0), decodetest.Noise(1, 7, 5))
				if err != nil || out.Width != 7 || out.Height != 5 {
					t.Errorf("Apply on 7x5: %v, %v", out, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want %q...", err, tt.want)
			}
		})
	}
}

func TestPhotoStrings(t *testing.T) {
	for _, tt := range []struct {
		op   Op
		want string
	}{
		{NewRandomSolarize(128, 0.5), "RandomSolarize(threshold=128, p=0.5)"},
		{NewRandomPosterize(4, 0.2), "RandomPosterize(bits=4, p=0.2)"},
		{NewRandomAutocontrast(0.5), "RandomAutocontrast(p=0.5)"},
		{NewRandomEqualize(0.1), "RandomEqualize(p=0.1)"},
		{NewGaussianBlur(23, 0.1, 2), "GaussianBlur(kernel_size=(23, 23), sigma=(0.1, 2))"},
		{&GaussianBlur{KernelWidth: 3, KernelHeight: 5}, "GaussianBlur(kernel_size=(3, 5), sigma=(0.1, 2))"},
	} {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestPhotoZeroAllocs checks that the new ops cost no allocations per sample once warm.
func TestPhotoZeroAllocs(t *testing.T) {
	src := photo(t, 3, 120, 90)
	work := clone(src)
	for _, op := range []Op{
		NewRandomSolarize(128, 0.5), NewRandomPosterize(4, 0.5), NewRandomAutocontrast(0.5),
		NewRandomEqualize(0.5), NewGaussianBlur(9, 0.1, 2), sharpnessOp{},
	} {
		t.Run(op.String(), func(t *testing.T) {
			c := NewContext()
			i := int64(0)
			sample := func() {
				i++
				c.Seed(1, 0, i)
				copy(work.Pix, src.Pix)
				if _, err := op.Apply(c, work); err != nil {
					t.Fatal(err)
				}
			}
			for range 5 {
				sample()
			}
			if n := testing.AllocsPerRun(20, sample); n != 0 {
				t.Errorf("%v allocations per sample, want 0", n)
			}
		})
	}
}

// sharpnessOp runs adjustSharpness with the Context's scratch, as the policies do.
type sharpnessOp struct{}

func (sharpnessOp) Apply(c *Context, m *decode.Image) (*decode.Image, error) {
	adjustSharpness(m, 1.7, c.byteBuf(6*m.Width))
	return m, nil
}
func (sharpnessOp) String() string { return "sharpness" }

// TestSmooth3x3 checks the integer form of PIL's SMOOTH filter against its float32
// arithmetic (ImagingFilter3x3: offset 0.5, rows as (left + middle) + right, every
// operation rounded to float32, truncated) on random and extreme neighbourhoods.
func TestSmooth3x3(t *testing.T) {
	k1, k5 := float32(1)/float32(13), float32(5)/float32(13)
	pil := func(v *[9]uint8) int {
		row := func(a, b, c uint8, mid float32) float32 {
			return float32(float32(float32(a)*k1)+float32(float32(b)*mid)) + float32(float32(c)*k1)
		}
		ss := float32(0.5) + row(v[6], v[7], v[8], k1)
		ss += row(v[3], v[4], v[5], k5)
		ss += row(v[0], v[1], v[2], k1)
		return int(min(max(ss, 0), 255))
	}
	r := rand.New(rand.NewPCG(3, 4))
	var v [9]uint8
	for i := range 500000 {
		for k := range v {
			switch i % 4 {
			case 0:
				v[k] = uint8(r.IntN(256))
			case 1: // near the ends, where float32 products are largest
				v[k] = uint8(240 + r.IntN(16))
			case 2: // a flat area with a little noise
				v[k] = uint8(100 + r.IntN(3))
			default:
				v[k] = []uint8{0, 255}[r.IntN(2)]
			}
		}
		s := 4 * int(v[4])
		for _, x := range v {
			s += int(x)
		}
		if got, want := smooth3x3(s), pil(&v); got != want {
			t.Fatalf("%v: smooth3x3 = %d, PIL's float32 filter %d", v, got, want)
		}
	}
}
