package augment

import (
	"fmt"
	"math"

	"github.com/conveyor-ml/conveyor/decode"
)

// This file and autoaugment.go hold torchvision's automatic augmentation policies
// (transforms.autoaugment): RandAugment, TrivialAugmentWide and AutoAugment, on PIL images. They share one op space,
// the augOps below, applied by the functional ops of this package (AdjustBrightness,
// Posterize, Affine, ...) with torchvision's magnitudes.

// augOp is an op of torchvision's _augmentation_space. The order of the first 14 is the
// order of the dictionary RandAugment and TrivialAugmentWide draw an index into.
type augOp uint8

const (
	opIdentity augOp = iota
	opShearX
	opShearY
	opTranslateX
	opTranslateY
	opRotate
	opBrightness
	opColor
	opContrast
	opSharpness
	opPosterize
	opSolarize
	opAutoContrast
	opEqualize
	opInvert // AutoAugment only

	numRandOps = opInvert // the ops RandAugment and TrivialAugmentWide choose from
)

var augOpNames = [...]string{
	"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
	"Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
	"Invert",
}

func (op augOp) String() string { return augOpNames[op] }

// radToDeg is CPython's math.degrees factor, 180 divided by the float64 π at run time (a
// Go constant expression would use the exact π and may round differently).
var radToDeg = func() float64 { pi := math.Pi; return 180 / pi }()

// linspace32 returns element i of torch.linspace(start, end, steps) in float32 as torch's
// CPU kernel computes it in its AVX2 build (the usual one on x86): step =
// (end-start)/(steps-1); element k = start + step*k for k in the first half and
// end - step*(steps-1-k) in the second, each a fused multiply-add (one rounding); except
// that the first steps/16*16 elements come in vectors of 8, each element the vector's
// first plus j*step, rounded twice. Other builds of torch round the last bit of some
// elements differently, so torchvision's own magnitudes vary at that level between
// machines.
func linspace32(start, end float64, steps, i int) float64 {
	s, e := float32(start), float32(end)
	if steps == 1 {
		return float64(s)
	}
	step := (e - s) / float32(steps-1)
	// fused is the kernel's scalar element k: exact in float64 (a float32 times a small
	// integer plus a float32), then rounded once.
	fused := func(k int) float32 {
		if k < steps/2 {
			return float32(float64(s) + float64(step)*float64(k))
		}
		return float32(float64(e) - float64(step)*float64(steps-1-k))
	}
	if i < steps/16*16 {
		k0 := i &^ 7
		return float64(fused(k0) + float32(float32(i-k0)*step))
	}
	return float64(fused(i))
}

// augSpace gives an op's magnitude for bin i of bins, and whether torchvision flips its
// sign with a coin, as _augmentation_space does; wide selects TrivialAugmentWide's
// ranges. width and height are the image's, for the translations of RandAugment and
// AutoAugment. hasBins is false for the ops without a magnitude (their magnitude is 0).
func augSpace(op augOp, wide bool, bins, i, width, height int) (mag float64, signed, hasBins bool) {
	enhance, shear, rotate := 0.9, 0.3, 30.0
	transX, transY := 150.0/331.0*float64(width), 150.0/331.0*float64(height)
	postDiv := 4.0
	if wide {
		enhance, shear, rotate = 0.99, 0.99, 135.0
		transX, transY = 32, 32
		postDiv = 6
	}
	switch op {
	case opShearX, opShearY:
		return linspace32(0, shear, bins, i), true, true
	case opTranslateX:
		return linspace32(0, transX, bins, i), true, true
	case opTranslateY:
		return linspace32(0, transY, bins, i), true, true
	case opRotate:
		return linspace32(0, rotate, bins, i), true, true
	case opBrightness, opColor, opContrast, opSharpness:
		return linspace32(0, enhance, bins, i), true, true
	case opPosterize:
		// 8 - (arange(bins) / ((bins-1)/d)).round().int(): a float32 quotient, rounded
		// half to even.
		q := float32(i) / float32(float64(bins-1)/postDiv)
		return 8 - math.RoundToEven(float64(q)), false, true
	case opSolarize:
		return linspace32(255, 0, bins, i), false, true
	}
	return 0, false, false
}

// applyAugOp is torchvision's _apply_op on a PIL image: it applies op with magnitude mag
// to img, in place or into a Context buffer, and returns the result.
func applyAugOp(c *Context, img *decode.Image, op augOp, mag float64, interp Interpolation, fill [3]uint8) *decode.Image {
	switch op {
	case opShearX, opShearY:
		// torchvision shears by atan(magnitude) degrees about the top-left corner
		// (center=[0, 0]), like the official AutoAugment, not about the image centre.
		var shear [2]float64
		shear[op-opShearX] = float64(math.Atan(mag) * radToDeg)
		m := inverseAffineMatrix([2]float64{}, 0, [2]float64{}, 1, shear)
		dst := c.Next(img)
		dst.Reset(img.Width, img.Height)
		transformAffine(dst, img, m, interp, fill)
		return dst
	case opTranslateX:
		return Affine(c, img, 0, [2]float64{math.Trunc(mag), 0}, 1, [2]float64{}, interp, fill)
	case opTranslateY:
		return Affine(c, img, 0, [2]float64{0, math.Trunc(mag)}, 1, [2]float64{}, interp, fill)
	case opRotate:
		return Rotate(c, img, mag, interp, fill)
	case opBrightness:
		AdjustBrightness(img, 1+mag)
	case opColor:
		AdjustSaturation(img, 1+mag)
	case opContrast:
		AdjustContrast(img, 1+mag)
	case opSharpness:
		adjustSharpness(img, 1+mag, c.byteBuf(6*img.Width))
	case opPosterize:
		Posterize(img, int(mag))
	case opSolarize:
		Solarize(img, mag)
	case opAutoContrast:
		Autocontrast(img)
	case opEqualize:
		Equalize(img)
	case opInvert:
		Invert(img)
	}
	return img
}

// DefaultMagnitudeBins is torchvision's number of magnitude bins of RandAugment and
// TrivialAugmentWide.
const DefaultMagnitudeBins = 31

func magnitudeBins(n int) int {
	if n == 0 {
		return DefaultMagnitudeBins
	}
	return n
}

func checkBins(op string, n int) error {
	if n < 2 && n != 0 {
		return paramErrorf(op, "NumMagnitudeBins %d must be ≥ 2", n)
	}
	return nil
}

// RandAugment applies NumOps ops in sequence, each chosen uniformly from 14 (Identity,
// ShearX, ShearY, TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness,
// Posterize, Solarize, AutoContrast, Equalize) at the fixed strength Magnitude, like
// torchvision.transforms.RandAugment on a PIL image. Per op it draws the op's index,
// then, for ops whose magnitude is signed (the geometric ones and the four enhancers), a
// coin that negates it: the draws torchvision makes, in its order. The magnitude of bin
// Magnitude of NumMagnitudeBins spans torchvision's ranges: shear 0 to 0.3 (as
// atan(m) degrees about the top-left corner), translation 0 to 150/331 of the image's
// width or height (truncated to whole pixels), rotation 0 to 30 degrees, enhancement
// factors 1±0.9, posterize 8 to 4 bits, solarize threshold 255 to 0.
//
// Colour ops work in place; geometric ones write into a Context buffer. An op costs from
// about 0.05 ms (a lookup table) to 0.5 ms (Sharpness) per 224×224 image on one core;
// RandAugment(2, 9) averages about 0.35 ms per 224×224 image.
type RandAugment struct {
	NumOps           int           // ops applied in sequence, ≥ 0; torchvision's default is 2
	Magnitude        int           // magnitude bin, in [0, NumMagnitudeBins); torchvision's default is 9
	NumMagnitudeBins int           // number of magnitude bins, ≥ 2; 0 means DefaultMagnitudeBins (31)
	Interpolation    Interpolation // sampling of the geometric ops; default Nearest, as torchvision's
	Fill             [3]uint8      // colour of the area geometric ops uncover; default black
}

// NewRandAugment returns a RandAugment of numOps ops at the given magnitude, with
// torchvision's other defaults.
func NewRandAugment(numOps, magnitude int) *RandAugment {
	return &RandAugment{NumOps: numOps, Magnitude: magnitude}
}

// Validate reports a negative NumOps, a NumMagnitudeBins below 2 (other than 0), a
// Magnitude outside [0, NumMagnitudeBins) (torchvision fails to index it) or an unknown
// Interpolation; it makes RandAugment a Validator.
func (o *RandAugment) Validate() error {
	if o.NumOps < 0 {
		return paramErrorf("RandAugment", "NumOps %d must be ≥ 0", o.NumOps)
	}
	if err := checkBins("RandAugment", o.NumMagnitudeBins); err != nil {
		return err
	}
	if bins := magnitudeBins(o.NumMagnitudeBins); o.Magnitude < 0 || o.Magnitude >= bins {
		return paramErrorf("RandAugment", "Magnitude %d not in [0, %d)", o.Magnitude, bins)
	}
	return checkInterpolation("RandAugment", o.Interpolation)
}

// OutputSize returns width, height: RandAugment keeps the size. It makes RandAugment a
// Sizer.
func (o *RandAugment) OutputSize(width, height int) (w, h int) { return width, height }

// draw makes RandAugment's draws for one op on a width×height image.
func (o *RandAugment) draw(c *Context, width, height int) (augOp, float64) {
	op := augOp(c.Rand.IntN(int(numRandOps)))
	mag, signed, _ := augSpace(op, false, magnitudeBins(o.NumMagnitudeBins), o.Magnitude, width, height)
	if signed && c.Rand.IntN(2) == 1 {
		mag = -mag
	}
	return op, mag
}

// Apply runs NumOps drawn ops on src.
func (o *RandAugment) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	img := src
	for range o.NumOps {
		op, mag := o.draw(c, img.Width, img.Height)
		img = applyAugOp(c, img, op, mag, o.Interpolation, o.Fill)
	}
	return img, nil
}

func (o *RandAugment) String() string {
	return fmt.Sprintf("RandAugment(num_ops=%d, magnitude=%d, num_magnitude_bins=%d, interpolation=%v, fill=%v)",
		o.NumOps, o.Magnitude, magnitudeBins(o.NumMagnitudeBins), o.Interpolation, o.Fill)
}

// TrivialAugmentWide applies one op chosen uniformly from RandAugment's 14, at a
// magnitude bin drawn uniformly from NumMagnitudeBins, like
// torchvision.transforms.TrivialAugmentWide on a PIL image: it draws the op's index,
// then the bin (for ops with a magnitude), then the sign coin (for signed ones), in
// torchvision's order. Its ranges are wider than RandAugment's: shear 0 to 0.99,
// translation 0 to 32 pixels, rotation 0 to 135 degrees, enhancement factors 1±0.99,
// posterize 8 to 2 bits, solarize threshold 255 to 0. About 0.2 ms per 224×224 image on
// one core on average.
type TrivialAugmentWide struct {
	NumMagnitudeBins int           // number of magnitude bins, ≥ 2; 0 means DefaultMagnitudeBins (31)
	Interpolation    Interpolation // sampling of the geometric ops; default Nearest, as torchvision's
	Fill             [3]uint8      // colour of the area geometric ops uncover; default black
}

// NewTrivialAugmentWide returns a TrivialAugmentWide with torchvision's defaults.
func NewTrivialAugmentWide() *TrivialAugmentWide { return &TrivialAugmentWide{} }

// Validate reports a NumMagnitudeBins below 2 (other than 0) or an unknown Interpolation;
// it makes TrivialAugmentWide a Validator.
func (o *TrivialAugmentWide) Validate() error {
	if err := checkBins("TrivialAugmentWide", o.NumMagnitudeBins); err != nil {
		return err
	}
	return checkInterpolation("TrivialAugmentWide", o.Interpolation)
}

// OutputSize returns width, height: TrivialAugmentWide keeps the size. It makes
// TrivialAugmentWide a Sizer.
func (o *TrivialAugmentWide) OutputSize(width, height int) (w, h int) { return width, height }

// draw makes TrivialAugmentWide's draws.
func (o *TrivialAugmentWide) draw(c *Context) (augOp, float64) {
	bins := magnitudeBins(o.NumMagnitudeBins)
	op := augOp(c.Rand.IntN(int(numRandOps)))
	mag, signed, hasBins := augSpace(op, true, bins, 0, 0, 0)
	if hasBins {
		mag, _, _ = augSpace(op, true, bins, c.Rand.IntN(bins), 0, 0)
	}
	if signed && c.Rand.IntN(2) == 1 {
		mag = -mag
	}
	return op, mag
}

// Apply runs one drawn op on src.
func (o *TrivialAugmentWide) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	op, mag := o.draw(c)
	return applyAugOp(c, src, op, mag, o.Interpolation, o.Fill), nil
}

func (o *TrivialAugmentWide) String() string {
	return fmt.Sprintf("TrivialAugmentWide(num_magnitude_bins=%d, interpolation=%v, fill=%v)",
		magnitudeBins(o.NumMagnitudeBins), o.Interpolation, o.Fill)
}
