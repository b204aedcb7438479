package augment

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/decode"
)

// checkRange reports a range that is not finite and ascending.
func checkRange(op, field string, r [2]float64) error {
	if !isFinite(r[0]) || !isFinite(r[1]) || r[0] > r[1] {
		return paramErrorf(op, "%s (%g, %g) must be finite and ascending", field, r[0], r[1])
	}
	return nil
}

// RandomRotation rotates the image by an angle uniform in Degrees, counter-clockwise,
// like torchvision.transforms.RandomRotation on a PIL image (see Rotate). Without Expand
// the output keeps the input's size; with it the output grows to hold the whole rotated
// image, as Pillow's rotate(expand=True), so its size depends on the angle.
type RandomRotation struct {
	// Degrees is the range the angle is drawn from, in degrees; torchvision's single
	// number d means (-d, d). Required (zero rotates by 0).
	Degrees       [2]float64
	Interpolation Interpolation // Nearest, Bilinear or Bicubic; default Nearest, as torchvision
	Expand        bool          // grow the output to hold the rotated image; default false
	Fill          [3]uint8      // the colour of areas outside the source; default black
}

// NewRandomRotation returns a RandomRotation by up to degrees either way, torchvision's
// RandomRotation(degrees) with its defaults.
func NewRandomRotation(degrees float64) *RandomRotation {
	return &RandomRotation{Degrees: [2]float64{-degrees, degrees}}
}

// Validate reports Degrees that are not finite and ascending or an unknown Interpolation;
// it makes RandomRotation a Validator.
func (o *RandomRotation) Validate() error {
	if err := checkRange("RandomRotation", "Degrees", o.Degrees); err != nil {
		return err
	}
	return checkInterpolation("RandomRotation", o.Interpolation)
}

// OutputSize returns the input's size without Expand; with it, the size for a fixed
// angle (Degrees[0] == Degrees[1]) or 0, 0 (unknown) for a random one, which
// MaxOutputSize bounds. It makes RandomRotation a Sizer.
func (o *RandomRotation) OutputSize(width, height int) (w, h int) {
	if !o.Expand {
		return width, height
	}
	if o.Degrees[0] != o.Degrees[1] || width <= 0 || height <= 0 {
		return 0, 0
	}
	return expandedSize(o.Degrees[0], width, height)
}

// MaxOutputSize returns a size that the output for any angle in Degrees and any input of
// at most width×height does not exceed along either side: the input's size without
// Expand; with it, the rotated bounding box at its widest (and tallest) in Degrees, its
// diagonal where the range holds the angle of the image's diagonal, rounded up, plus one
// pixel for Pillow's rounding of the box's corners outwards. It makes RandomRotation a
// MaxSizer, so that Pipeline.Largest can size a random expanding rotation.
func (o *RandomRotation) MaxOutputSize(width, height int) (w, h int) {
	if !o.Expand {
		return width, height
	}
	if width <= 0 || height <= 0 {
		return 0, 0
	}
	return maxExpandedSize(o.Degrees[0], o.Degrees[1], width, height)
}

// maxExpandedSize bounds expandedSize for angles in [lo, hi] and sizes up to width×height.
// The box of a width×height image rotated by θ is ew = width·|cos θ| + height·|sin θ| wide
// and eh = width·|sin θ| + height·|cos θ| tall; each is largest at an end of the range or
// where the side it measures is parallel to the diagonal, θ ≡ ±atan(height/width) (ew) or
// θ ≡ ±(90° - atan(height/width)) (eh) modulo 180°. Pillow's expanded size, the box's
// corners (about the image's centre) rounded outwards, is less than the extent plus 2.
func maxExpandedSize(lo, hi float64, width, height int) (w, h int) {
	if hi-lo >= 180 {
		lo, hi = 0, 180 // the extents repeat every 180°
	}
	fw, fh := float64(width), float64(height)
	ext := func(deg float64) (ew, eh float64) {
		sn, cs := math.Sincos(deg * degToRad)
		sn, cs = math.Abs(sn), math.Abs(cs)
		return fw*cs + fh*sn, fw*sn + fh*cs
	}
	ew, eh := ext(lo)
	grow := func(deg float64) {
		a, b := ext(deg)
		ew, eh = math.Max(ew, a), math.Max(eh, b)
	}
	grow(hi)
	phi := math.Atan2(fh, fw) / degToRad
	for _, base := range [4]float64{phi, -phi, 90 - phi, phi - 90} {
		// The critical angles base + k·180 inside [lo, hi].
		for k := math.Ceil((lo - base) / 180); base+k*180 <= hi; k++ {
			grow(base + k*180)
		}
	}
	// A margin far above the rounding of the sines and cosines (about 1e-16 relative).
	const margin = 1e-6
	return int(math.Ceil(ew+margin)) + 1, int(math.Ceil(eh+margin)) + 1
}

// expandedSize is the size of Pillow's rotate(angle, expand=True) of a width×height image.
func expandedSize(angle float64, width, height int) (w, h int) {
	// As rotate computes it: the transpose shortcuts swap or keep the sides.
	switch a := pyMod(angle, 360); {
	case a == 0 || a == 180:
		return width, height
	case a == 90 || a == 270:
		return height, width
	}
	_, w, h = rotateMatrix(pyMod(angle, 360), width, height, true)
	return w, h
}

// Apply rotates src into a Context buffer.
func (o *RandomRotation) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return rotate(c, src, o.Params(c.Rand), o.Expand, o.Interpolation, o.Fill), nil
}

// Params draws the angle Apply would use, uniform in Degrees, as torchvision's
// RandomRotation.get_params.
func (o *RandomRotation) Params(r *rand.Rand) float64 {
	return uniform(r, o.Degrees[0], o.Degrees[1])
}

func (o *RandomRotation) String() string {
	return fmt.Sprintf("RandomRotation(degrees=(%g, %g), interpolation=%v, expand=%t, fill=%v)",
		o.Degrees[0], o.Degrees[1], o.Interpolation, o.Expand, o.Fill)
}

// RandomAffine applies a random affine map about the image centre, like
// torchvision.transforms.RandomAffine on a PIL image (see Affine): an angle uniform in
// Degrees, a translation of up to Translate[0]·width and Translate[1]·height pixels
// (uniform, then rounded to whole pixels, halves to even), a scale uniform in Scale, and
// shears uniform in Shear's x range (Shear[0], Shear[1]) and y range (Shear[2],
// Shear[3]), drawn in that order as get_params does. The output keeps the input's size.
type RandomAffine struct {
	// Degrees is the rotation range in degrees (clockwise, as torchvision's affine);
	// torchvision's single number d means (-d, d). Default (0, 0): no rotation.
	Degrees [2]float64
	// Translate holds the largest horizontal and vertical shifts as fractions of the
	// width and height, each in [0, 1]. Default (0, 0): no translation.
	Translate [2]float64
	// Scale is the range of the scale factor, positive; zero means no scaling (1), as
	// torchvision's scale=None. Default zero.
	Scale [2]float64
	// Shear holds the x shear range then the y shear range, in degrees; torchvision's
	// single number s is (-s, s, 0, 0) and its pair (a, b) is (a, b, 0, 0). Default zero:
	// no shear.
	Shear         [4]float64
	Interpolation Interpolation // Nearest, Bilinear or Bicubic; default Nearest, as torchvision
	Fill          [3]uint8      // the colour of areas outside the source; default black
}

// Validate reports ranges that are not finite and ascending, a Translate outside [0, 1]
// or a Scale that is not positive, as torchvision's RandomAffine does, or an unknown
// Interpolation; it makes RandomAffine a Validator.
func (o *RandomAffine) Validate() error {
	const op = "RandomAffine"
	if err := checkRange(op, "Degrees", o.Degrees); err != nil {
		return err
	}
	for i, t := range o.Translate {
		if !(t >= 0 && t <= 1) {
			return paramErrorf(op, "Translate[%d] %g not in [0, 1]", i, t)
		}
	}
	if o.Scale != [2]float64{} {
		if err := checkRange(op, "Scale", o.Scale); err != nil {
			return err
		}
		if !(o.Scale[0] > 0) {
			return paramErrorf(op, "Scale (%g, %g) must be positive", o.Scale[0], o.Scale[1])
		}
	}
	if err := checkRange(op, "Shear x", [2]float64{o.Shear[0], o.Shear[1]}); err != nil {
		return err
	}
	if err := checkRange(op, "Shear y", [2]float64{o.Shear[2], o.Shear[3]}); err != nil {
		return err
	}
	for _, s := range o.Shear {
		// tan(±90°) is infinite: the map degenerates.
		if math.Abs(s) >= 90 {
			return paramErrorf(op, "Shear %v must be within (-90, 90) degrees", o.Shear)
		}
	}
	return checkInterpolation(op, o.Interpolation)
}

// OutputSize returns width, height: RandomAffine keeps the size. It makes RandomAffine a
// Sizer.
func (o *RandomAffine) OutputSize(width, height int) (w, h int) { return width, height }

// Params draws the map Apply would use on a width×height image, as torchvision's
// RandomAffine.get_params: angle, then the translation (whole pixels), the scale and the
// shears.
func (o *RandomAffine) Params(r *rand.Rand, width, height int) (angle float64, translate [2]float64, scale float64, shear [2]float64) {
	angle = uniform(r, o.Degrees[0], o.Degrees[1])
	if o.Translate != [2]float64{} {
		maxDx := o.Translate[0] * float64(width)
		maxDy := o.Translate[1] * float64(height)
		translate[0] = math.RoundToEven(uniform(r, -maxDx, maxDx))
		translate[1] = math.RoundToEven(uniform(r, -maxDy, maxDy))
	}
	scale = 1
	if o.Scale != [2]float64{} {
		scale = uniform(r, o.Scale[0], o.Scale[1])
	}
	if o.Shear != [4]float64{} {
		shear[0] = uniform(r, o.Shear[0], o.Shear[1])
		if o.Shear[2] != 0 || o.Shear[3] != 0 {
			shear[1] = uniform(r, o.Shear[2], o.Shear[3])
		}
	}
	return angle, translate, scale, shear
}

// Apply transforms src into a Context buffer.
func (o *RandomAffine) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	angle, translate, scale, shear := o.Params(c.Rand, src.Width, src.Height)
	return Affine(c, src, angle, translate, scale, shear, o.Interpolation, o.Fill), nil
}

func (o *RandomAffine) String() string {
	s := fmt.Sprintf("RandomAffine(degrees=(%g, %g)", o.Degrees[0], o.Degrees[1])
	if o.Translate != [2]float64{} {
		s += fmt.Sprintf(", translate=(%g, %g)", o.Translate[0], o.Translate[1])
	}
	if o.Scale != [2]float64{} {
		s += fmt.Sprintf(", scale=(%g, %g)", o.Scale[0], o.Scale[1])
	}
	if o.Shear != [4]float64{} {
		s += fmt.Sprintf(", shear=(%g, %g, %g, %g)", o.Shear[0], o.Shear[1], o.Shear[2], o.Shear[3])
	}
	return s + fmt.Sprintf(", interpolation=%v, fill=%v)", o.Interpolation, o.Fill)
}
