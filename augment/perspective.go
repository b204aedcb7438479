package augment

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/decode"
)

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
