package augment

import (
	"fmt"
	"image"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/decode"
)

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
