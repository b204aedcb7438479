package augment

import (
	"fmt"
	"math"
	"sync"

	"github.com/conveyor-ml/conveyor/decode"
)

// ColorJitter randomly changes brightness, contrast, saturation and hue, like
// torchvision.transforms.ColorJitter on a PIL image. Per sample it draws a random order of
// the four adjustments, then the factors in the order brightness, contrast, saturation,
// hue (skipping unset ones): brightness, contrast and saturation factors uniform in
// [max(0, 1-x), 1+x], the hue shift uniform in [-Hue, Hue]. It then applies the set ones
// in the drawn order with PIL's arithmetic (see AdjustBrightness and friends), in place.
//
// Brightness and contrast are table lookups (about 0.1 ms for 224×224 on one core),
// saturation costs a few ns a pixel (0.25 ms); hue converts every pixel to 8-bit HSV and
// back as PIL does (1 ms), more than the other three together.
type ColorJitter struct {
	Brightness float64 // how much to jitter brightness, >= 0; default 0 (unchanged)
	Contrast   float64 // how much to jitter contrast, >= 0; default 0 (unchanged)
	Saturation float64 // how much to jitter saturation, >= 0; default 0 (unchanged)
	Hue        float64 // how much to jitter hue, in [0, 0.5]; default 0 (unchanged)
}

// NewColorJitter returns a ColorJitter with the given strengths.
func NewColorJitter(brightness, contrast, saturation, hue float64) *ColorJitter {
	return &ColorJitter{Brightness: brightness, Contrast: contrast, Saturation: saturation, Hue: hue}
}

// Validate reports a Brightness, Contrast or Saturation that is negative, infinite or NaN,
// or a Hue outside [0, 0.5], as torchvision's ColorJitter does; it makes ColorJitter a
// Validator.
func (o *ColorJitter) Validate() error {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"Brightness", o.Brightness}, {"Contrast", o.Contrast}, {"Saturation", o.Saturation}} {
		if !(f.v >= 0) || !isFinite(f.v) {
			return paramErrorf("ColorJitter", "%s %g must be finite and ≥ 0", f.name, f.v)
		}
	}
	if !(o.Hue >= 0 && o.Hue <= 0.5) {
		return paramErrorf("ColorJitter", "Hue %g not in [0, 0.5]", o.Hue)
	}
	return nil
}

// OutputSize returns width, height: ColorJitter keeps the size. It makes ColorJitter a
// Sizer.
func (o *ColorJitter) OutputSize(width, height int) (w, h int) { return width, height }

// Apply jitters src in place.
func (o *ColorJitter) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// torch.randperm(4), then the factors, as in ColorJitter.get_params.
	order := [4]uint8{0, 1, 2, 3}
	for i := 3; i > 0; i-- {
		j := c.Rand.IntN(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	var f [4]float64
	for k, v := range [...]float64{o.Brightness, o.Contrast, o.Saturation} {
		if v > 0 {
			// torch draws float32 factors; rounding ours likewise gives PIL the same alphas.
			f[k] = float64(float32(uniform(c.Rand, max(0, 1-v), 1+v)))
		}
	}
	if o.Hue > 0 {
		f[3] = float64(float32(uniform(c.Rand, -o.Hue, o.Hue)))
	}
	for _, k := range order {
		switch {
		case k == 0 && o.Brightness > 0:
			AdjustBrightness(src, f[0])
		case k == 1 && o.Contrast > 0:
			AdjustContrast(src, f[1])
		case k == 2 && o.Saturation > 0:
			AdjustSaturation(src, f[2])
		case k == 3 && o.Hue > 0:
			AdjustHue(src, f[3])
		}
	}
	return src, nil
}

func (o *ColorJitter) String() string {
	return fmt.Sprintf("ColorJitter(brightness=%g, contrast=%g, saturation=%g, hue=%g)",
		o.Brightness, o.Contrast, o.Saturation, o.Hue)
}

// RandomGrayscale turns the image grey with probability P, in place, like
// torchvision.transforms.RandomGrayscale on an RGB PIL image: PIL's luma replicated to the
// three channels.
type RandomGrayscale struct {
	P float64 // probability of turning grey; torchvision's default is 0.1
}

// NewRandomGrayscale returns a RandomGrayscale with probability p.
func NewRandomGrayscale(p float64) *RandomGrayscale { return &RandomGrayscale{P: p} }

// Apply turns src grey in place or leaves it as it is.
func (o *RandomGrayscale) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if c.Rand.Float64() < o.P {
		Grayscale(src)
	}
	return src, nil
}

// Validate reports a P outside [0, 1]; it makes RandomGrayscale a Validator.
func (o *RandomGrayscale) Validate() error { return checkProbability("RandomGrayscale", o.P) }

// OutputSize returns width, height: RandomGrayscale keeps the size. It makes
// RandomGrayscale a Sizer.
func (o *RandomGrayscale) OutputSize(width, height int) (w, h int) { return width, height }

func (o *RandomGrayscale) String() string { return fmt.Sprintf("RandomGrayscale(p=%g)", o.P) }

// luma is PIL's RGB to L conversion, ITU-R 601-2 in 16-bit fixed point (the weights sum
// to 65536, so grey stays grey).
func luma(r, g, b uint8) uint8 {
	return uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
}

// Grayscale replaces every pixel of m with its PIL luma (Image.convert("L")) in all three
// channels.
func Grayscale(m *decode.Image) {
	for y := range m.Height {
		row := m.Row(y)
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			l := luma(p[0], p[1], p[2])
			p[0], p[1], p[2] = l, l, l
		}
	}
}

// blend is PIL's ImagingBlend for one value: in1 + alpha*(in2-in1) in float32, clipped to
// [0, 255] and truncated (not rounded).
func blend(in1, in2 int, alpha float32) uint8 {
	// The conversion keeps the compiler from fusing the multiply-add, which would skip
	// the product's rounding that PIL's C code does.
	v := float32(in1) + float32(alpha*float32(in2-in1))
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v)
}

// applyLUT maps every value of m through lut.
func applyLUT(m *decode.Image, lut *[256]uint8) {
	for y := range m.Height {
		row := m.Row(y)
		for i, v := range row {
			row[i] = lut[v]
		}
	}
}

// AdjustBrightness does PIL's ImageEnhance.Brightness(m).enhance(factor), which is what
// torchvision's adjust_brightness does to a PIL image: a blend with black.
func AdjustBrightness(m *decode.Image, factor float64) {
	alpha := float32(factor)
	var lut [256]uint8
	for v := range lut {
		lut[v] = blend(0, v, alpha)
	}
	applyLUT(m, &lut)
}

// AdjustContrast does PIL's ImageEnhance.Contrast(m).enhance(factor): a blend with a grey
// image whose level is the mean luma of m rounded half up.
func AdjustContrast(m *decode.Image, factor float64) {
	alpha := float32(factor)
	var sum int64
	for y := range m.Height {
		row := m.Row(y)
		var s uint32 // a row's sum fits easily
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			s += uint32(luma(p[0], p[1], p[2]))
		}
		sum += int64(s)
	}
	n := m.Width * m.Height
	if n == 0 {
		return
	}
	// ImageStat's mean is a float64 quotient; ImageEnhance takes int(mean + 0.5).
	mean := int(float64(sum)/float64(n) + 0.5)
	var lut [256]uint8
	for v := range lut {
		lut[v] = blend(mean, v, alpha)
	}
	applyLUT(m, &lut)
}

// AdjustSaturation does PIL's ImageEnhance.Color(m).enhance(factor): a per-pixel blend
// with the pixel's luma.
func AdjustSaturation(m *decode.Image, factor float64) {
	alpha := float32(factor)
	// Products alpha*(v-l) for every difference v-l in [-255, 255], rounded to float32 as
	// PIL rounds them; a pixel then costs three additions.
	var prod [511]float32
	for d := range prod {
		prod[d] = alpha * float32(d-255)
	}
	for y := range m.Height {
		row := m.Row(y)
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			l := int(luma(p[0], p[1], p[2]))
			fl := float32(l)
			p[0] = clip8f(fl + prod[int(p[0])-l+255])
			p[1] = clip8f(fl + prod[int(p[1])-l+255])
			p[2] = clip8f(fl + prod[int(p[2])-l+255])
		}
	}
}

// clip8f clips v to [0, 255] and truncates it, as ImagingBlend does, without branches
// (saturated images clip often and unpredictably): int(v) truncates toward zero, so
// values in (-1, 0] give 0 either way.
func clip8f(v float32) uint8 {
	return uint8(min(max(int(v), 0), 255))
}

// AdjustHue does torchvision's adjust_hue on a PIL image: convert to PIL's 8-bit HSV, add
// uint8(int(factor*255)) to H with wrap-around (numpy uint8 arithmetic), convert back.
// factor must be in [-0.5, 0.5]. Even factor 0 changes some pixels slightly, as PIL's
// 8-bit round trip does.
func AdjustHue(m *decode.Image, factor float64) {
	// int() truncates toward zero; the conversion to uint8 wraps as numpy's cast does.
	shift := uint8(int(factor * 255))
	t := hsvTab()
	for y := range m.Height {
		row := m.Row(y)
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			h, s, v := t.rgbToHSV(p[0], p[1], p[2])
			p[0], p[1], p[2] = hsvToRGB(h+shift, s, v)
		}
	}
}

// hsvTables hold PIL's 8-bit hue and saturation for every case of rgb2hsv, so that a
// pixel costs lookups instead of two float32 and one float64 division (about 30% of
// AdjustHue's time). Built on first use: 256 KiB, about two milliseconds.
type hsvTables struct {
	// hue is indexed by [branch][d1][d2]: the branch says which channel is the maximum
	// (red, green, blue, in the order PIL tests them) and d1, d2 are how far the other two
	// channels, in RGB order, are below it; the larger of them is the range max-min.
	hue [3][256][256]uint8
	sat [256][256]uint8 // [max][max-min]
}

var hsvTab = sync.OnceValue(func() *hsvTables {
	t := new(hsvTables)
	for br := range 3 {
		for d1 := range 256 {
			for d2 := range 256 {
				if d1 > 0 || d2 > 0 {
					t.hue[br][d1][d2] = pilHue(br, d1, d2)
				}
			}
		}
	}
	for mx := 1; mx < 256; mx++ {
		for cr := 1; cr <= mx; cr++ {
			// s = cr / (float)maxc; (int)(s * 255.0)
			t.sat[mx][cr] = clip8(int(float64(float32(cr)/float32(mx)) * 255.0))
		}
	}
	return t
})

// rgbToHSV is PIL's rgb2hsv (libImaging/Convert.c). A grey pixel finds zeros in the
// tables, as PIL's special case gives.
func (t *hsvTables) rgbToHSV(r, g, b uint8) (h, s, v uint8) {
	maxc, minc := max(r, g, b), min(r, g, b)
	// Select the branch without jumps: which channel is largest is noise-driven in
	// flat areas, and mispredicted branches cost more than the lookups.
	br, d1, d2 := 2, maxc-r, maxc-g
	if g == maxc {
		br, d2 = 1, maxc-b
	}
	if r == maxc {
		br, d1, d2 = 0, maxc-g, maxc-b
	}
	return t.hue[br][d1][d2], t.sat[maxc][maxc-minc], maxc
}

// pilHue is the hue part of PIL's rgb2hsv, with its mix of float and double arithmetic
// reproduced operation by operation: the result is truncated to 8 bits, so a single
// rounding difference can move it a step. See hsvTables.hue for the arguments.
func pilHue(branch, d1, d2 int) uint8 {
	cr := float32(max(d1, d2))
	x1, x2 := float32(d1)/cr, float32(d2)/cr
	var hf float32
	switch branch {
	case 0: // r is max: h = bc - gc
		hf = x2 - x1
	case 1: // g is max: h = 2.0 + rc - bc
		hf = float32(2.0 + float64(x1) - float64(x2))
	default: // b is max: h = 4.0 + gc - rc
		hf = float32(4.0 + float64(x2) - float64(x1))
	}
	// fmod(h/6 + 1, 1) for an argument in [0, 2).
	t := float64(hf)/6.0 + 1.0
	if t >= 1 {
		t -= 1
	}
	hf = float32(t)
	return clip8(int(float64(hf) * 255.0))
}

// Per-value parts of PIL's hsv2rgb that depend on H or S alone, computed as it computes
// them.
var (
	hueSector [256]int8    // floor(h*6.0/255.0)
	hueFrac   [256]float32 // h*6.0/255.0 - sector, stored as float
	satFrac   [256]float32 // s/255.0, stored as float
)

func init() {
	for x := range 256 {
		hh := float64(x) * 6.0 / 255.0
		i := math.Floor(hh)
		hueSector[x] = int8(i)
		hueFrac[x] = float32(hh - i)
		satFrac[x] = float32(float64(x) / 255.0)
	}
}

// hsvToRGB is PIL's hsv2rgb (libImaging/Convert.c).
func hsvToRGB(h, s, v uint8) (r, g, b uint8) {
	if s == 0 {
		return v, v, v
	}
	f, fs, fv := hueFrac[h], satFrac[s], float64(v)
	p := roundHalfUp(fv * (1.0 - float64(fs)))
	q := roundHalfUp(fv * (1.0 - float64(fs*f)))
	t := roundHalfUp(fv * (1.0 - float64(float64(fs)*(1.0-float64(f)))))
	switch hueSector[h] % 6 {
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
	default:
		return v, p, q
	}
}

// roundHalfUp is C's round() clipped to [0, 255] for x in [0, 2^52): the nearest
// integer, halves away from zero. Exact, since x - trunc(x) is; faster than math.Round.
func roundHalfUp(x float64) uint8 {
	n := int(x)
	if x-float64(n) >= 0.5 {
		n++
	}
	return clip8(n)
}

func clip8(v int) uint8 {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v)
}
