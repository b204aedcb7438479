package augment

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/decode"
)

// This file holds the photometric ops of torchvision's automatic augmentation policies:
// the functional forms (Solarize, Posterize, Autocontrast, Equalize, Invert,
// AdjustSharpness), which reproduce Pillow's ImageOps and ImageEnhance on an RGB image,
// and the Random* ops that apply them with a probability. All but AdjustSharpness are
// 256-entry lookup tables (Autocontrast and Equalize build theirs from the histogram), so
// they cost about 0.04 to 0.09 ms per 224×224 image on one core (see
// bench_photo_test.go).

// scratch holds an op's working rows between samples, so that filters that need the
// unfiltered neighbours of a pixel cost no allocations after warm-up.
type scratch struct {
	bytes  []uint8
	floats []float32
}

// byteBuf returns n bytes of c's scratch memory, contents unspecified.
func (c *Context) byteBuf(n int) []uint8 {
	if cap(c.scratch.bytes) < n {
		c.scratch.bytes = make([]uint8, n)
	}
	return c.scratch.bytes[:n]
}

// floatBuf returns n float32s of c's scratch memory, contents unspecified.
func (c *Context) floatBuf(n int) []float32 {
	if cap(c.scratch.floats) < n {
		c.scratch.floats = make([]float32, n)
	}
	return c.scratch.floats[:n]
}

// Solarize inverts every value of m at or above threshold (v becomes 255-v), like PIL's
// ImageOps.solarize, which torchvision's F.solarize calls on a PIL image. The threshold
// may be fractional, as RandAugment's magnitudes are; a threshold of 0 or less inverts
// everything, one above 255 nothing.
func Solarize(m *decode.Image, threshold float64) {
	var lut [256]uint8
	for i := range lut {
		lut[i] = uint8(i)
		if float64(i) >= threshold {
			lut[i] = 255 - uint8(i)
		}
	}
	applyLUT(m, &lut)
}

// Posterize keeps the top bits bits of every value of m (the others become 0), like PIL's
// ImageOps.posterize. bits must be in [0, 8]; 0 makes the image black, 8 leaves it as it
// is.
func Posterize(m *decode.Image, bits int) {
	// PIL: ~(2**(8-bits) - 1).
	mask := ^uint8(0xff >> uint(min(max(bits, 0), 8)))
	var lut [256]uint8
	for i := range lut {
		lut[i] = uint8(i) & mask
	}
	applyLUT(m, &lut)
}

// Invert replaces every value v of m with 255-v, like PIL's ImageOps.invert.
func Invert(m *decode.Image) {
	var lut [256]uint8
	for i := range lut {
		lut[i] = 255 - uint8(i)
	}
	applyLUT(m, &lut)
}

// histogram3 counts the values of each channel of m.
func histogram3(m *decode.Image, h *[3][256]int) {
	*h = [3][256]int{}
	for y := range m.Height {
		row := m.Row(y)
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			h[0][p[0]]++
			h[1][p[1]]++
			h[2][p[2]]++
		}
	}
}

// applyLUT3 maps every channel of m through its own table.
func applyLUT3(m *decode.Image, lut *[3][256]uint8) {
	for y := range m.Height {
		row := m.Row(y)
		for i := 0; i+2 < len(row); i += 3 {
			p := row[i : i+3 : i+3]
			p[0], p[1], p[2] = lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]
		}
	}
}

// Autocontrast stretches each channel of m separately so that its darkest value becomes
// 0 and its brightest 255, like PIL's ImageOps.autocontrast(m) (no cutoff), which is what
// torchvision's F.autocontrast does to a PIL image. A channel with a single value is left
// as it is. The table is PIL's: int(v*scale - lo*scale) in float64, clipped.
func Autocontrast(m *decode.Image) {
	var h [3][256]int
	histogram3(m, &h)
	var lut [3][256]uint8
	for c := range 3 {
		lo, hi := 0, 255
		for lo < 256 && h[c][lo] == 0 {
			lo++
		}
		for hi >= 0 && h[c][hi] == 0 {
			hi--
		}
		if hi <= lo {
			for v := range 256 {
				lut[c][v] = uint8(v)
			}
			continue
		}
		scale := 255.0 / float64(hi-lo)
		offset := -float64(lo) * scale
		for v := range 256 {
			// The conversion keeps the compiler from fusing the multiply-add, which
			// Python does not do; int() truncates toward zero.
			lut[c][v] = clip8(int(float64(float64(v)*scale) + offset))
		}
	}
	applyLUT3(m, &lut)
}

// Equalize equalizes the histogram of each channel of m separately, like PIL's
// ImageOps.equalize, which torchvision's F.equalize calls on a PIL image: with the
// channel's counts h and step = (number of pixels - count of its largest value) / 255
// (integer division), value v maps to (step/2 + h[0] + ... + h[v-1]) / step, clipped to
// 255. A channel with one distinct value, or with step 0 (fewer than 255 pixels below its
// largest value), is left as it is.
func Equalize(m *decode.Image) {
	var h [3][256]int
	histogram3(m, &h)
	var lut [3][256]uint8
	for c := range 3 {
		distinct, total, last := 0, 0, 0
		for _, n := range h[c] {
			if n > 0 {
				distinct++
				total += n
				last = n
			}
		}
		step := 0
		if distinct > 1 {
			step = (total - last) / 255
		}
		if step == 0 {
			for v := range 256 {
				lut[c][v] = uint8(v)
			}
			continue
		}
		n := step / 2
		for v := range 256 {
			lut[c][v] = clip8(n / step)
			n += h[c][v]
		}
	}
	applyLUT3(m, &lut)
}

// AdjustSharpness does PIL's ImageEnhance.Sharpness(m).enhance(factor), which is what
// torchvision's adjust_sharpness does to a PIL image: a blend (see AdjustBrightness) of
// the image filtered with PIL's 3×3 SMOOTH kernel towards m itself, factor 0 giving the
// smoothed image and 2 a sharpened one. As in PIL, the filter leaves the outermost rows
// and columns as they are, so they keep their values whatever the factor, and an image
// less than 3 pixels wide or high is not changed at all. The result is pixel-exact (see
// smooth3x3).
//
// It allocates two rows of scratch per call; ops use their Context's instead. About
// 0.35 ms per 224×224 image on one core.
func AdjustSharpness(m *decode.Image, factor float64) {
	adjustSharpness(m, factor, make([]uint8, 6*m.Width))
}

// smooth3x3 is PIL's SMOOTH filter (ImagingFilter3x3 with the kernel 1 1 1 / 1 5 1 /
// 1 1 1 divided by 13) of one value, given s, the sum of its 3×3 neighbourhood plus 4
// times itself. PIL computes 0.5 + s/13 in float32 and truncates. That is
// floor((2s + 13) / 26) exactly: s/13 + 0.5 is never closer than 0.5/13 to an integer,
// and float32's error on a sum of nine products up to 255 is below 2e-4.
func smooth3x3(s int) int { return (2*s + 13) / 26 }

// adjustSharpness is AdjustSharpness with 6*m.Width bytes of scratch.
func adjustSharpness(m *decode.Image, factor float64, buf []uint8) {
	if m.Width < 3 || m.Height < 3 {
		return
	}
	// Products alpha*d for every difference d = orig-smoothed, as blend rounds them.
	alpha := float32(factor)
	var prod [511]float32
	for d := range prod {
		prod[d] = alpha * float32(d-255)
	}
	n := 3 * m.Width
	prev, cur := buf[:n:n], buf[n:2*n:2*n] // unfiltered rows y-1 and y
	copy(prev, m.Row(0))
	for y := 1; y < m.Height-1; y++ {
		copy(cur, m.Row(y))
		out, next := m.Row(y), m.Row(y+1)
		next = next[:n]
		// A sliding window of column sums over rows y-1, y, y+1, three channels at once.
		a0, a1, a2 := int(prev[0])+int(cur[0])+int(next[0]), int(prev[1])+int(cur[1])+int(next[1]), int(prev[2])+int(cur[2])+int(next[2])
		b0, b1, b2 := int(prev[3])+int(cur[3])+int(next[3]), int(prev[4])+int(cur[4])+int(next[4]), int(prev[5])+int(cur[5])+int(next[5])
		for i := 3; i+5 < n; i += 3 {
			p, c, q, o := prev[i+3:i+6:i+6], cur[i:i+6:i+6], next[i+3:i+6:i+6], out[i:i+3:i+3]
			c0, c1, c2 := int(p[0])+int(c[3])+int(q[0]), int(p[1])+int(c[4])+int(q[1]), int(p[2])+int(c[5])+int(q[2])
			// blend(smoothed, v, alpha): smoothed + alpha*(v-smoothed) in float32,
			// clipped and truncated.
			v0, v1, v2 := int(c[0]), int(c[1]), int(c[2])
			s0, s1, s2 := smooth3x3(a0+b0+c0+4*v0), smooth3x3(a1+b1+c1+4*v1), smooth3x3(a2+b2+c2+4*v2)
			o[0] = clip8f(float32(s0) + prod[v0-s0+255])
			o[1] = clip8f(float32(s1) + prod[v1-s1+255])
			o[2] = clip8f(float32(s2) + prod[v2-s2+255])
			a0, a1, a2, b0, b1, b2 = b0, b1, b2, c0, c1, c2
		}
		prev, cur = cur, prev
	}
}

// applyWithP is the draw shared by the Random* photometric ops: apply with probability P,
// one uniform draw per sample, as torchvision's forward does (torch.rand(1) < p).
func applyWithP(c *Context, p float64) bool { return c.Rand.Float64() < p }

// RandomSolarize solarizes the image (see Solarize) with probability P, in place, like
// torchvision.transforms.RandomSolarize on a PIL image.
type RandomSolarize struct {
	Threshold float64 // values at or above it are inverted; required (no default)
	P         float64 // probability of solarizing; torchvision's default is 0.5
}

// NewRandomSolarize returns a RandomSolarize with the given threshold and probability.
func NewRandomSolarize(threshold, p float64) *RandomSolarize {
	return &RandomSolarize{Threshold: threshold, P: p}
}

// Validate reports a Threshold that is not finite or a P outside [0, 1]; it makes
// RandomSolarize a Validator.
func (o *RandomSolarize) Validate() error {
	if !isFinite(o.Threshold) {
		return paramErrorf("RandomSolarize", "Threshold %g must be finite", o.Threshold)
	}
	return checkProbability("RandomSolarize", o.P)
}

// OutputSize returns width, height: RandomSolarize keeps the size. It makes
// RandomSolarize a Sizer.
func (o *RandomSolarize) OutputSize(width, height int) (w, h int) { return width, height }

// Apply solarizes src in place or leaves it as it is.
func (o *RandomSolarize) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if applyWithP(c, o.P) {
		Solarize(src, o.Threshold)
	}
	return src, nil
}

func (o *RandomSolarize) String() string {
	return fmt.Sprintf("RandomSolarize(threshold=%g, p=%g)", o.Threshold, o.P)
}

// RandomPosterize posterizes the image (see Posterize) with probability P, in place, like
// torchvision.transforms.RandomPosterize on a PIL image.
type RandomPosterize struct {
	Bits int     // bits kept per channel, in [0, 8]; required (no default)
	P    float64 // probability of posterizing; torchvision's default is 0.5
}

// NewRandomPosterize returns a RandomPosterize with the given bits and probability.
func NewRandomPosterize(bits int, p float64) *RandomPosterize {
	return &RandomPosterize{Bits: bits, P: p}
}

// Validate reports Bits outside [0, 8], as torchvision's F.posterize does, or a P outside
// [0, 1]; it makes RandomPosterize a Validator.
func (o *RandomPosterize) Validate() error {
	if o.Bits < 0 || o.Bits > 8 {
		return paramErrorf("RandomPosterize", "Bits %d not in [0, 8]", o.Bits)
	}
	return checkProbability("RandomPosterize", o.P)
}

// OutputSize returns width, height: RandomPosterize keeps the size. It makes
// RandomPosterize a Sizer.
func (o *RandomPosterize) OutputSize(width, height int) (w, h int) { return width, height }

// Apply posterizes src in place or leaves it as it is.
func (o *RandomPosterize) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if applyWithP(c, o.P) {
		Posterize(src, o.Bits)
	}
	return src, nil
}

func (o *RandomPosterize) String() string {
	return fmt.Sprintf("RandomPosterize(bits=%d, p=%g)", o.Bits, o.P)
}

// RandomAutocontrast stretches each channel's range (see Autocontrast) with probability
// P, in place, like torchvision.transforms.RandomAutocontrast on a PIL image.
type RandomAutocontrast struct {
	P float64 // probability of applying; torchvision's default is 0.5
}

// NewRandomAutocontrast returns a RandomAutocontrast with probability p.
func NewRandomAutocontrast(p float64) *RandomAutocontrast { return &RandomAutocontrast{P: p} }

// Validate reports a P outside [0, 1]; it makes RandomAutocontrast a Validator.
func (o *RandomAutocontrast) Validate() error { return checkProbability("RandomAutocontrast", o.P) }

// OutputSize returns width, height: RandomAutocontrast keeps the size. It makes
// RandomAutocontrast a Sizer.
func (o *RandomAutocontrast) OutputSize(width, height int) (w, h int) { return width, height }

// Apply stretches src in place or leaves it as it is.
func (o *RandomAutocontrast) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if applyWithP(c, o.P) {
		Autocontrast(src)
	}
	return src, nil
}

func (o *RandomAutocontrast) String() string { return fmt.Sprintf("RandomAutocontrast(p=%g)", o.P) }

// RandomEqualize equalizes each channel's histogram (see Equalize) with probability P, in
// place, like torchvision.transforms.RandomEqualize on a PIL image.
type RandomEqualize struct {
	P float64 // probability of applying; torchvision's default is 0.5
}

// NewRandomEqualize returns a RandomEqualize with probability p.
func NewRandomEqualize(p float64) *RandomEqualize { return &RandomEqualize{P: p} }

// Validate reports a P outside [0, 1]; it makes RandomEqualize a Validator.
func (o *RandomEqualize) Validate() error { return checkProbability("RandomEqualize", o.P) }

// OutputSize returns width, height: RandomEqualize keeps the size. It makes
// RandomEqualize a Sizer.
func (o *RandomEqualize) OutputSize(width, height int) (w, h int) { return width, height }

// Apply equalizes src in place or leaves it as it is.
func (o *RandomEqualize) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if applyWithP(c, o.P) {
		Equalize(src)
	}
	return src, nil
}

func (o *RandomEqualize) String() string { return fmt.Sprintf("RandomEqualize(p=%g)", o.P) }
