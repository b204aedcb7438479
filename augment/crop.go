package augment

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/decode"
)

// Default parameters of RandomResizedCrop, as in torchvision.
var (
	DefaultScale = [2]float64{0.08, 1}
	DefaultRatio = [2]float64{3.0 / 4, 4.0 / 3}
)

// RandomResizedCrop crops a random part of the image and resizes it to Width×Height, like
// torchvision.transforms.RandomResizedCrop on a PIL image with bilinear interpolation. The
// crop and the resize are one resampling pass over the source (no intermediate copy); a
// 224×224 output from a 500×375 source costs about as much as one resize of the crop.
type RandomResizedCrop struct {
	Width, Height int // output size; required
	// Scale bounds the crop's area as a fraction of the image's; zero means DefaultScale
	// (0.08, 1).
	Scale [2]float64
	// Ratio bounds the crop's aspect ratio (width/height); zero means DefaultRatio
	// (3/4, 4/3).
	Ratio [2]float64
}

// NewRandomResizedCrop returns a RandomResizedCrop to width×height with torchvision's
// default scale and ratio.
func NewRandomResizedCrop(width, height int) *RandomResizedCrop {
	return &RandomResizedCrop{Width: width, Height: height, Scale: DefaultScale, Ratio: DefaultRatio}
}

func (o *RandomResizedCrop) params() (scale, ratio [2]float64) {
	return orDefault(o.Scale, DefaultScale), orDefault(o.Ratio, DefaultRatio)
}

// Validate reports a Width or Height that is not positive, a Scale that is not finite,
// non-negative and ascending, or a Ratio that is not finite, positive and ascending (zero
// Scale and Ratio mean the defaults); it makes RandomResizedCrop a Validator.
func (o *RandomResizedCrop) Validate() error {
	if err := checkPositive("RandomResizedCrop", "Width", o.Width); err != nil {
		return err
	}
	if err := checkPositive("RandomResizedCrop", "Height", o.Height); err != nil {
		return err
	}
	scale, ratio := o.params()
	if !(scale[0] >= 0 && scale[0] <= scale[1]) || !isFinite(scale[1]) {
		return paramErrorf("RandomResizedCrop", "Scale (%g, %g) must be finite, non-negative and ascending", scale[0], scale[1])
	}
	if !(ratio[0] > 0 && ratio[0] <= ratio[1]) || !isFinite(ratio[1]) {
		return paramErrorf("RandomResizedCrop", "Ratio (%g, %g) must be finite, positive and ascending", ratio[0], ratio[1])
	}
	return nil
}

// OutputSize returns Width, Height whatever the input; it makes RandomResizedCrop a Sizer.
func (o *RandomResizedCrop) OutputSize(width, height int) (w, h int) { return o.Width, o.Height }

// Params returns the crop rectangle Apply would use on a width×height image, drawing from r
// exactly as torchvision's RandomResizedCrop.get_params does: up to ten tries of a uniform
// area fraction in Scale and a log-uniform aspect ratio in Ratio, each accepted when the
// rounded crop fits, placed uniformly; otherwise a centred crop of the whole image clamped
// to Ratio. A loader can use it to decode only (a downscaled version of) the crop.
// o must be valid (see Validate) and the image non-empty.
func (o *RandomResizedCrop) Params(r *rand.Rand, width, height int) image.Rectangle {
	scale, ratio := o.params()
	area := float64(width) * float64(height)
	logLo, logHi := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * uniform(r, scale[0], scale[1])
		aspect := math.Exp(uniform(r, logLo, logHi))
		// Python's round() rounds halves to even.
		w := int(math.RoundToEven(math.Sqrt(target * aspect)))
		h := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < w && w <= width && 0 < h && h <= height {
			i := r.IntN(height - h + 1)
			j := r.IntN(width - w + 1)
			return image.Rect(j, i, j+w, i+h)
		}
	}
	inRatio := float64(width) / float64(height)
	w, h := width, height
	if inRatio < ratio[0] {
		h = int(math.RoundToEven(float64(w) / ratio[0]))
	} else if inRatio > ratio[1] {
		w = int(math.RoundToEven(float64(h) * ratio[1]))
	}
	i, j := (height-h)/2, (width-w)/2
	return image.Rect(j, i, j+w, i+h)
}

// uniform returns a value uniform in [lo, hi), like torch's uniform_.
func uniform(r *rand.Rand, lo, hi float64) float64 {
	return lo + (hi-lo)*r.Float64()
}

// Apply crops and resizes src into a Context buffer.
func (o *RandomResizedCrop) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	rect, w, h, err := o.Region(c, src.Width, src.Height)
	if err != nil {
		return nil, err
	}
	return c.Resizer.Resize(c.Next(src), src, rect, w, h)
}

// Region returns the crop Apply would take from a width×height image (see Params) and
// the output size; it makes RandomResizedCrop a RegionOp.
func (o *RandomResizedCrop) Region(c *Context, width, height int) (image.Rectangle, int, int, error) {
	if err := o.Validate(); err != nil {
		return image.Rectangle{}, 0, 0, err
	}
	if width <= 0 || height <= 0 {
		return image.Rectangle{}, 0, 0, fmt.Errorf("augment: %v: empty %dx%d image", o, width, height)
	}
	return o.Params(c.Rand, width, height), o.Width, o.Height, nil
}

func (o *RandomResizedCrop) String() string {
	scale, ratio := o.params()
	return fmt.Sprintf("RandomResizedCrop(%dx%d, scale=(%g, %g), ratio=(%.4g, %.4g))",
		o.Width, o.Height, scale[0], scale[1], ratio[0], ratio[1])
}

// Resize scales the image like torchvision.transforms.Resize on a PIL image (bilinear,
// antialiased): with Size set, the shorter side becomes Size and the longer one
// int(Size*long/short), keeping the aspect ratio; otherwise the output is exactly
// Width×Height. An image that already has the output size is returned unchanged.
type Resize struct {
	Size          int // the shorter side's new length; 0 means use Width×Height
	Width, Height int // the exact output size when Size is 0
}

// NewResize returns a Resize that makes the shorter side size pixels long.
func NewResize(size int) *Resize { return &Resize{Size: size} }

// NewResizeTo returns a Resize to exactly width×height.
func NewResizeTo(width, height int) *Resize { return &Resize{Width: width, Height: height} }

// Validate reports a negative Size, or, when Size is 0, a Width or Height that is not
// positive; it makes Resize a Validator.
func (o *Resize) Validate() error {
	if o.Size < 0 {
		return paramErrorf("Resize", "Size %d must be ≥ 0", o.Size)
	}
	if o.Size > 0 {
		return nil // Width and Height are not used
	}
	if o.Width <= 0 {
		return paramErrorf("Resize", "Width %d must be positive when Size is 0", o.Width)
	}
	if o.Height <= 0 {
		return paramErrorf("Resize", "Height %d must be positive when Size is 0", o.Height)
	}
	return nil
}

// OutputSize returns the size Resize makes of a width×height image: Width×Height when Size
// is 0, else the size with the shorter side Size long, or 0, 0 when the input's size is
// unknown (0). It makes Resize a Sizer.
func (o *Resize) OutputSize(width, height int) (w, h int) {
	if o.Size <= 0 {
		return o.Width, o.Height
	}
	if width <= 0 || height <= 0 {
		return 0, 0
	}
	// torchvision's _compute_resized_output_size: int(size * long / short), a true
	// division truncated.
	short, long := min(width, height), max(width, height)
	newLong := int(float64(o.Size*long) / float64(short))
	if width <= height {
		return o.Size, newLong
	}
	return newLong, o.Size
}

// Apply resizes src into a Context buffer, or returns src when it already has the size.
func (o *Resize) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if src.Width <= 0 || src.Height <= 0 {
		return nil, fmt.Errorf("augment: %v: empty %dx%d image", o, src.Width, src.Height)
	}
	w, h := o.OutputSize(src.Width, src.Height)
	if w == src.Width && h == src.Height {
		return src, nil
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("augment: %v: %dx%d image gives a %dx%d output", o, src.Width, src.Height, w, h)
	}
	return c.Resizer.Resize(c.Next(src), src, image.Rect(0, 0, src.Width, src.Height), w, h)
}

func (o *Resize) String() string {
	if o.Size > 0 {
		return fmt.Sprintf("Resize(%d)", o.Size)
	}
	return fmt.Sprintf("Resize(%dx%d)", o.Width, o.Height)
}

// CenterCrop cuts the central Width×Height part of the image, like
// torchvision.transforms.CenterCrop: the top-left corner is at round((H-h)/2),
// round((W-w)/2) with halves rounded to even, and an image smaller than the crop is first
// padded with black (the extra pixel of an odd padding goes right or bottom).
type CenterCrop struct {
	Width, Height int // output size; required
}

// NewCenterCrop returns a CenterCrop to width×height.
func NewCenterCrop(width, height int) *CenterCrop {
	return &CenterCrop{Width: width, Height: height}
}

// Offset returns the position in a width×height image of the crop's top-left corner; it
// is negative along a side where the image is padded.
func (o *CenterCrop) Offset(width, height int) (x, y int) {
	return centerOffset(width, o.Width), centerOffset(height, o.Height)
}

// centerOffset follows torchvision's F.center_crop along one side of length n cropped to m.
func centerOffset(n, m int) int {
	pad := 0
	if m > n {
		pad = (m - n) / 2 // left or top padding; the odd pixel goes to the other side
		n = m
	}
	return int(math.RoundToEven(float64(n-m)/2)) - pad
}

// Validate reports a Width or Height that is not positive; it makes CenterCrop a
// Validator.
func (o *CenterCrop) Validate() error {
	if err := checkPositive("CenterCrop", "Width", o.Width); err != nil {
		return err
	}
	return checkPositive("CenterCrop", "Height", o.Height)
}

// OutputSize returns Width, Height whatever the input; it makes CenterCrop a Sizer.
func (o *CenterCrop) OutputSize(width, height int) (w, h int) { return o.Width, o.Height }

// Apply copies the crop of src into a Context buffer, or returns src when it already has
// the size.
func (o *CenterCrop) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if src.Width == o.Width && src.Height == o.Height {
		return src, nil
	}
	x0, y0 := o.Offset(src.Width, src.Height)
	dst := c.Next(src)
	dst.Reset(o.Width, o.Height)
	// Columns [cx0, cx1) and rows [cy0, cy1) of dst come from src; the rest is padding.
	cx0, cx1 := max(0, -x0), min(o.Width, src.Width-x0)
	cy0, cy1 := max(0, -y0), min(o.Height, src.Height-y0)
	for y := range o.Height {
		row := dst.Row(y)
		if y < cy0 || y >= cy1 || cx0 >= cx1 {
			clear(row)
			continue
		}
		clear(row[:3*cx0])
		srow := src.Row(y + y0)
		copy(row[3*cx0:3*cx1], srow[3*(cx0+x0):])
		clear(row[3*cx1:])
	}
	return dst, nil
}

func (o *CenterCrop) String() string {
	return fmt.Sprintf("CenterCrop(%dx%d)", o.Width, o.Height)
}
