package augment

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/decode"
)

// RandomHorizontalFlip mirrors the image left to right with probability P, in place, like
// torchvision.transforms.RandomHorizontalFlip (one uniform draw per sample, flip when it is
// below P).
type RandomHorizontalFlip struct {
	P float64 // probability of a flip; torchvision's default is 0.5
}

// NewRandomHorizontalFlip returns a RandomHorizontalFlip with probability p.
func NewRandomHorizontalFlip(p float64) *RandomHorizontalFlip {
	return &RandomHorizontalFlip{P: p}
}

// Apply flips src in place or leaves it as it is.
func (o *RandomHorizontalFlip) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if o.Mirrors(c) {
		FlipHorizontal(src)
	}
	return src, nil
}

// Mirrors draws, as Apply does, whether this sample is mirrored; it makes
// RandomHorizontalFlip a MirrorOp.
func (o *RandomHorizontalFlip) Mirrors(c *Context) bool { return c.Rand.Float64() < o.P }

// Validate reports a P outside [0, 1]; it makes RandomHorizontalFlip a Validator.
func (o *RandomHorizontalFlip) Validate() error { return checkProbability("RandomHorizontalFlip", o.P) }

// OutputSize returns width, height: a flip keeps the size. It makes RandomHorizontalFlip a
// Sizer.
func (o *RandomHorizontalFlip) OutputSize(width, height int) (w, h int) { return width, height }

func (o *RandomHorizontalFlip) String() string {
	return fmt.Sprintf("RandomHorizontalFlip(p=%g)", o.P)
}

// RandomVerticalFlip mirrors the image top to bottom with probability P, in place, like
// torchvision.transforms.RandomVerticalFlip.
type RandomVerticalFlip struct {
	P float64 // probability of a flip; torchvision's default is 0.5
}

// NewRandomVerticalFlip returns a RandomVerticalFlip with probability p.
func NewRandomVerticalFlip(p float64) *RandomVerticalFlip {
	return &RandomVerticalFlip{P: p}
}

// Apply flips src in place or leaves it as it is.
func (o *RandomVerticalFlip) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if c.Rand.Float64() < o.P {
		FlipVertical(src)
	}
	return src, nil
}

// Validate reports a P outside [0, 1]; it makes RandomVerticalFlip a Validator.
func (o *RandomVerticalFlip) Validate() error { return checkProbability("RandomVerticalFlip", o.P) }

// OutputSize returns width, height: a flip keeps the size. It makes RandomVerticalFlip a
// Sizer.
func (o *RandomVerticalFlip) OutputSize(width, height int) (w, h int) { return width, height }

func (o *RandomVerticalFlip) String() string {
	return fmt.Sprintf("RandomVerticalFlip(p=%g)", o.P)
}

// FlipHorizontal reverses the order of the pixels in every row of m (m.FlipHorizontal).
func FlipHorizontal(m *decode.Image) { m.FlipHorizontal() }

// FlipVertical reverses the order of the rows of m.
func FlipVertical(m *decode.Image) {
	for i, j := 0, m.Height-1; i < j; i, j = i+1, j-1 {
		a, b := m.Row(i), m.Row(j)
		// Swap through a stack buffer: memmove is several times faster than a byte loop.
		var tmp [512]byte
		for len(a) > 0 {
			n := copy(tmp[:], a)
			copy(a, b[:n])
			copy(b, tmp[:n])
			a, b = a[n:], b[n:]
		}
	}
}
