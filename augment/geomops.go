package augment

import (
	"fmt"
	"image"
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

// RandomPerspective, with probability P, moves the image's four corners inwards by random
// amounts of up to DistortionScale times half the width and height and warps the image
// accordingly, like torchvision.transforms.RandomPerspective on a PIL image: the corners
// are drawn as get_params does (integer offsets), the eight coefficients solved as
// _get_perspective_coeffs does (rounded to float32, as torchvision returns them) and the
// image sampled as Pillow's Image.transform(PERSPECTIVE). The output keeps the input's
// size. A bilinear warp of 224×224 costs about 0.55 ms on one core.
type RandomPerspective struct {
	DistortionScale float64 // how far corners move, in [0, 1]; torchvision's default is 0.5
	P               float64 // probability of a warp; torchvision's default is 0.5
	// Interpolation is Nearest, Bilinear or Bicubic. torchvision and NewRandomPerspective use
	// Bilinear; the zero value is Nearest.
	Interpolation Interpolation
	Fill          [3]uint8 // the colour of areas outside the source; default black
}

// NewRandomPerspective returns torchvision's RandomPerspective(distortion_scale, p) with
// bilinear interpolation.
func NewRandomPerspective(distortionScale, p float64) *RandomPerspective {
	return &RandomPerspective{DistortionScale: distortionScale, P: p, Interpolation: Bilinear}
}

// Validate reports a DistortionScale or P outside [0, 1] or an unknown Interpolation; it
// makes RandomPerspective a Validator.
func (o *RandomPerspective) Validate() error {
	if !(o.DistortionScale >= 0 && o.DistortionScale <= 1) {
		return paramErrorf("RandomPerspective", "DistortionScale %g not in [0, 1]", o.DistortionScale)
	}
	if err := checkProbability("RandomPerspective", o.P); err != nil {
		return err
	}
	return checkInterpolation("RandomPerspective", o.Interpolation)
}

// OutputSize returns width, height: RandomPerspective keeps the size. It makes
// RandomPerspective a Sizer.
func (o *RandomPerspective) OutputSize(width, height int) (w, h int) { return width, height }

// Corners draws the corners' new positions (top-left, top-right, bottom-right,
// bottom-left) for a width×height image as torchvision's RandomPerspective.get_params.
func (o *RandomPerspective) Corners(r *rand.Rand, width, height int) [4][2]int {
	hw, hh := width/2, height/2
	dx, dy := int(o.DistortionScale*float64(hw)), int(o.DistortionScale*float64(hh))
	randint := func(lo, hi int) int { return lo + r.IntN(hi-lo) } // torch.randint: [lo, hi)
	var e [4][2]int
	e[0] = [2]int{randint(0, dx+1), randint(0, dy+1)}
	e[1] = [2]int{randint(width-dx-1, width), randint(0, dy+1)}
	e[2] = [2]int{randint(width-dx-1, width), randint(height-dy-1, height)}
	e[3] = [2]int{randint(0, dx+1), randint(height-dy-1, height)}
	return e
}

// Apply warps src into a Context buffer, or returns it unchanged.
func (o *RandomPerspective) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !(c.Rand.Float64() < o.P) {
		return src, nil
	}
	if src.Width <= 0 || src.Height <= 0 {
		return nil, fmt.Errorf("augment: %v: empty %dx%d image", o, src.Width, src.Height)
	}
	end := o.Corners(c.Rand, src.Width, src.Height)
	return perspective(c, src, end, o.Interpolation, o.Fill), nil
}

// perspective is torchvision's F.perspective of a PIL image from the image's corners
// (startpoints) to end (top-left, top-right, bottom-right, bottom-left), written into
// c.Next(src). Collinear end points leave the fill.
func perspective(c *Context, src *decode.Image, end [4][2]int, interp Interpolation, fill [3]uint8) *decode.Image {
	w, h := src.Width-1, src.Height-1
	start := [4][2]int{{0, 0}, {w, 0}, {w, h}, {0, h}}
	coeffs, ok := perspectiveCoeffs(start, end)
	dst := c.Next(src)
	dst.Reset(src.Width, src.Height)
	fillImage(dst, fill)
	if ok {
		genericTransform(dst, src, coeffs[:], true, interp)
	}
	return dst
}

func (o *RandomPerspective) String() string {
	return fmt.Sprintf("RandomPerspective(distortion_scale=%g, p=%g, interpolation=%v, fill=%v)",
		o.DistortionScale, o.P, o.Interpolation, o.Fill)
}

// perspectiveCoeffs is torchvision's _get_perspective_coeffs: the eight coefficients of
// the map from end (output) points to start (input) points, solved in float64 and rounded
// to float32 as torchvision returns them. It solves the 8×8 system by Gaussian elimination
// with partial pivoting where torchvision uses least squares; for four points in general
// position both give the exact solution up to float64 rounding, far below float32's. ok is
// false for a singular system (collinear points).
func perspectiveCoeffs(start, end [4][2]int) (coeffs [8]float64, ok bool) {
	var a [8][9]float64
	for i := range 4 {
		p1x, p1y := float64(end[i][0]), float64(end[i][1])
		p2x, p2y := float64(start[i][0]), float64(start[i][1])
		a[2*i] = [9]float64{p1x, p1y, 1, 0, 0, 0, -p2x * p1x, -p2x * p1y, p2x}
		a[2*i+1] = [9]float64{0, 0, 0, p1x, p1y, 1, -p2y * p1x, -p2y * p1y, p2y}
	}
	for col := range 8 {
		p := col
		for r := col + 1; r < 8; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if a[p][col] == 0 {
			return coeffs, false
		}
		a[col], a[p] = a[p], a[col]
		for r := col + 1; r < 8; r++ {
			f := a[r][col] / a[col][col]
			for k := col; k < 9; k++ {
				a[r][k] -= f * a[col][k]
			}
		}
	}
	for r := 7; r >= 0; r-- {
		v := a[r][8]
		for k := r + 1; k < 8; k++ {
			v -= a[r][k] * coeffs[k]
		}
		coeffs[r] = v / a[r][r]
	}
	for i, v := range coeffs {
		coeffs[i] = float64(float32(v))
	}
	return coeffs, true
}

// PaddingMode says how RandomCrop pads, as torchvision's padding_mode.
type PaddingMode int

const (
	PadConstant  PaddingMode = iota // the Fill colour
	PadEdge                         // the edge pixel repeated
	PadReflect                      // mirrored without repeating the edge: 2 1 | 1 2 3 | 2 1... as numpy's "reflect"
	PadSymmetric                    // mirrored with the edge repeated: 1 | 1 2 3 | 3, as numpy's "symmetric"
)

func (m PaddingMode) String() string {
	switch m {
	case PadConstant:
		return "constant"
	case PadEdge:
		return "edge"
	case PadReflect:
		return "reflect"
	case PadSymmetric:
		return "symmetric"
	}
	return fmt.Sprintf("PaddingMode(%d)", int(m))
}

// RandomCrop cuts a Width×Height part at a uniformly random position, like
// torchvision.transforms.RandomCrop on a PIL image: the image is first padded by Padding
// (left, top, right, bottom), then, with PadIfNeeded, by the missing width on both left
// and right and the missing height on both top and bottom, in PaddingMode, each padding
// mirroring (PadReflect, PadSymmetric) the image the one before made. An image still
// smaller than the crop is an error, as in torchvision. The padded image is never built:
// each output pixel is read from its source pixel or the padding rule (about 10 µs for
// 224×224).
type RandomCrop struct {
	Width, Height int         // output size; required
	Padding       [4]int      // padding on the left, top, right and bottom, ≥ 0; default none
	PadIfNeeded   bool        // pad an image smaller than the crop; default false
	Fill          [3]uint8    // the colour of PadConstant padding; default black
	PaddingMode   PaddingMode // how padding is filled; default PadConstant
}

// NewRandomCrop returns a RandomCrop to width×height with padding pixels on every side
// (torchvision's RandomCrop(size, padding)).
func NewRandomCrop(width, height, padding int) *RandomCrop {
	return &RandomCrop{Width: width, Height: height, Padding: [4]int{padding, padding, padding, padding}}
}

// Validate reports a Width or Height that is not positive, negative Padding or an unknown
// PaddingMode; it makes RandomCrop a Validator. (torchvision's negative padding, which
// crops, is not supported.)
func (o *RandomCrop) Validate() error {
	if err := checkPositive("RandomCrop", "Width", o.Width); err != nil {
		return err
	}
	if err := checkPositive("RandomCrop", "Height", o.Height); err != nil {
		return err
	}
	for _, p := range o.Padding {
		if p < 0 {
			return paramErrorf("RandomCrop", "Padding %v must be ≥ 0", o.Padding)
		}
	}
	if o.PaddingMode < PadConstant || o.PaddingMode > PadSymmetric {
		return paramErrorf("RandomCrop", "PaddingMode %d is not one of constant, edge, reflect, symmetric", int(o.PaddingMode))
	}
	return nil
}

// OutputSize returns Width, Height whatever the input; it makes RandomCrop a Sizer.
func (o *RandomCrop) OutputSize(width, height int) (w, h int) { return o.Width, o.Height }

// Params returns the crop rectangle in the coordinates of the unpadded width×height image
// (it may extend beyond it into the padding), drawing as torchvision's get_params: the
// top offset, then the left one, each uniform; an image (after padding) equal to the crop
// draws nothing.
func (o *RandomCrop) Params(r *rand.Rand, width, height int) (image.Rectangle, error) {
	pw, ph, ex, ey := o.padded(width, height)
	if pw < o.Width || ph < o.Height {
		return image.Rectangle{}, fmt.Errorf("augment: %v: crop %dx%d is larger than the padded %dx%d image", o, o.Width, o.Height, pw, ph)
	}
	i, j := 0, 0
	if pw != o.Width || ph != o.Height {
		i = r.IntN(ph - o.Height + 1)
		j = r.IntN(pw - o.Width + 1)
	}
	left, top := o.Padding[0]+ex, o.Padding[1]+ey
	return image.Rect(j-left, i-top, j-left+o.Width, i-top+o.Height), nil
}

// padded returns the size of the padded width×height image and the padding PadIfNeeded
// adds on each side horizontally (ex) and vertically (ey), after Padding.
func (o *RandomCrop) padded(width, height int) (pw, ph, ex, ey int) {
	pw = width + o.Padding[0] + o.Padding[2]
	ph = height + o.Padding[1] + o.Padding[3]
	if o.PadIfNeeded && pw < o.Width {
		ex = o.Width - pw
	}
	if o.PadIfNeeded && ph < o.Height {
		ey = o.Height - ph
	}
	return pw + 2*ex, ph + 2*ey, ex, ey
}

// srcIndex maps position p of a side of length n, in the unpadded image's coordinates, to
// the source position it shows, or -1 for the constant fill. The side is padded by before
// and after (Padding), then by extra on both ends (PadIfNeeded). As in torchvision, which
// pads in turn, the second padding mirrors the first padded image, not the source: with
// PadReflect or PadSymmetric the two differ once the first padding is nonzero.
func srcIndex(p, n, before, after, extra int, mode PaddingMode) int {
	if extra > 0 {
		q := padIndex(p+before, n+before+after, mode)
		if q < 0 {
			return -1
		}
		p = q - before
	}
	return padIndex(p, n, mode)
}

// Apply copies the crop into a Context buffer.
func (o *RandomCrop) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if src.Width <= 0 || src.Height <= 0 {
		return nil, fmt.Errorf("augment: %v: empty %dx%d image", o, src.Width, src.Height)
	}
	rect, err := o.Params(c.Rand, src.Width, src.Height)
	if err != nil {
		return nil, err
	}
	_, _, ex, ey := o.padded(src.Width, src.Height)
	dst := c.Next(src)
	dst.Reset(o.Width, o.Height)
	// Columns [cx0, cx1) of the output lie inside the source.
	cx0, cx1 := min(max(-rect.Min.X, 0), o.Width), max(min(src.Width-rect.Min.X, o.Width), 0)
	cx1 = max(cx1, cx0)
	for y := range o.Height {
		row := dst.Row(y)
		sy := srcIndex(rect.Min.Y+y, src.Height, o.Padding[1], o.Padding[3], ey, o.PaddingMode)
		if sy < 0 {
			fillRow(row, o.Fill)
			continue
		}
		in := src.Row(sy)
		if cx1 > cx0 {
			copy(row[3*cx0:3*cx1], in[3*(rect.Min.X+cx0):])
		}
		for x := 0; x < o.Width; x++ {
			if x == cx0 && cx1 > cx0 {
				x = cx1 - 1
				continue
			}
			px := row[3*x : 3*x+3 : 3*x+3]
			if sx := srcIndex(rect.Min.X+x, src.Width, o.Padding[0], o.Padding[2], ex, o.PaddingMode); sx < 0 {
				px[0], px[1], px[2] = o.Fill[0], o.Fill[1], o.Fill[2]
			} else {
				copy(px, in[3*sx:3*sx+3])
			}
		}
	}
	return dst, nil
}

// padIndex maps position p of a side of length n, extended by padding, to the source
// position it shows, or -1 for the constant fill.
func padIndex(p, n int, mode PaddingMode) int {
	if p >= 0 && p < n {
		return p
	}
	switch mode {
	case PadEdge:
		return min(max(p, 0), n-1)
	case PadReflect:
		if n == 1 {
			return 0
		}
		period := 2 * (n - 1)
		q := ((p % period) + period) % period
		if q >= n {
			q = period - q
		}
		return q
	case PadSymmetric:
		period := 2 * n
		q := ((p % period) + period) % period
		if q >= n {
			q = period - 1 - q
		}
		return q
	}
	return -1
}

func (o *RandomCrop) String() string {
	s := fmt.Sprintf("RandomCrop(%dx%d", o.Width, o.Height)
	if o.Padding != [4]int{} {
		s += fmt.Sprintf(", padding=%v", o.Padding)
	}
	if o.PadIfNeeded {
		s += ", pad_if_needed"
	}
	if o.PaddingMode == PadConstant {
		return s + fmt.Sprintf(", fill=%v)", o.Fill)
	}
	return s + fmt.Sprintf(", padding_mode=%v)", o.PaddingMode)
}
