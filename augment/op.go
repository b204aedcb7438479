package augment

import (
	"image"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/seed"
	"github.com/conveyor-ml/conveyor/pack"
)

// Op is one per-sample transformation. Implementations must be safe for concurrent use by
// several Contexts and must draw all randomness from c.Rand.
//
// Apply returns the transformed image: src itself (modified in place) or an image obtained
// from c.Next(src). It must not keep src or its result after returning. String describes
// the op and its parameters, for logs and error messages (Pipeline.String and
// Pipeline.Validate use it).
//
// An op may also implement Validator, to have its parameters checked before the first
// sample, and Sizer, to tell its output size without an image, so that Pipeline.Validate
// can check the pipeline's final size (MaxSizer, where the size varies with the draws,
// bounds it for Pipeline.Largest); RegionOp lets a loader decode only the part of the
// image the op crops. An op that implements none of them works as well, checked only as
// it runs.
type Op interface {
	Apply(c *Context, src *decode.Image) (*decode.Image, error)
	String() string
}

// RegionOp is an Op that begins by cropping a rectangle of its input and resampling it to
// a fixed size with decode.Resizer, such as RandomResizedCrop. A loader that knows the
// image's size from its header can draw the rectangle before decoding and decode only
// that part (decode.Decoder.DecodeRegion, or a stored record's rows resampled with
// decode.Resizer), instead of calling Apply on the whole image.
type RegionOp interface {
	Op
	// Region returns the rectangle Apply would crop from a width×height image and the
	// size it would resample it to, drawing from c.Rand exactly as Apply does, so that the
	// random stream continues the same either way.
	Region(c *Context, width, height int) (r image.Rectangle, w, h int, err error)
}

// MirrorOp is an Op that mirrors its input left to right or leaves it as it is, such as
// RandomHorizontalFlip. A loader whose last op on the image is one may draw the decision
// and write the sample mirrored as it packs it (pack.Packer.PackMirrored), as DALI's
// CropMirrorNormalize does, instead of flipping the image first.
type MirrorOp interface {
	Op
	// Mirrors draws from c.Rand exactly as Apply does and reports whether Apply would
	// mirror the image.
	Mirrors(c *Context) bool
}

// Context carries one worker's per-sample state: the random generator, the resampler and
// two reusable image buffers that ops ping-pong between, so a sample costs no allocations
// after warm-up.
// A Context is not safe for concurrent use.
type Context struct {
	// Rand is the sample's random stream. The loader reseeds it for every sample with Seed.
	Rand *rand.Rand
	// Resizer is the resampler for ops that crop or scale; custom ops may use it too. It
	// keeps its weight tables and scratch between samples.
	Resizer decode.Resizer

	pcg *rand.PCG
	buf [2]decode.Image

	// scratch holds the working rows of filters (AdjustSharpness, GaussianBlur).
	scratch scratch
}

// NewContext returns a Context with a generator seeded from (0, 0).
func NewContext() *Context {
	p := rand.NewPCG(0, 0)
	return &Context{Rand: rand.New(p), pcg: p}
}

// Fresh returns a new Context that continues c's random stream, without c's buffers and
// resampler state: for dropping a worker's scratch memory in the middle of a sample
// without changing what the sample draws. c must not be used afterwards.
func (c *Context) Fresh() *Context {
	return &Context{Rand: c.Rand, pcg: c.pcg}
}

// Seed resets the random stream to a function of (seed, epoch, index) alone.
func (c *Context) Seed(s, epoch uint64, index int64) {
	c.pcg.Seed(seed.Mix(s, epoch), seed.Mix(uint64(index), s^0x9e3779b97f4a7c15))
}

// Next returns a scratch image that is not src, for an op to write its output into.
func (c *Context) Next(src *decode.Image) *decode.Image {
	if src == &c.buf[0] {
		return &c.buf[1]
	}
	return &c.buf[0]
}

// Pipeline applies ops in order.
type Pipeline []Op

// Apply runs the ops of p on src and returns the final image. It stops before the first
// TensorOp: those run on the packed sample (see ApplyTensor), after the loader packs the
// image Apply returns.
func (p Pipeline) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	img := src
	for _, op := range p {
		if _, ok := op.(TensorOp); ok {
			break
		}
		var err error
		if img, err = op.Apply(c, img); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// ApplyTensor runs the TensorOps of p, in order, on the packed sample s; the image ops
// before them are Apply's. The loader calls it on each sample's batch slot right after
// packing, with the Context Apply used, so the random stream continues.
func (p Pipeline) ApplyTensor(c *Context, s pack.Sample) error {
	for _, op := range p {
		if t, ok := op.(TensorOp); ok {
			if err := t.ApplyTensor(c, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// HasTensorOps reports whether p holds a TensorOp.
func (p Pipeline) HasTensorOps() bool {
	for _, op := range p {
		if _, ok := op.(TensorOp); ok {
			return true
		}
	}
	return false
}

// String lists the ops, for logs.
func (p Pipeline) String() string {
	s := "["
	for i, op := range p {
		if i > 0 {
			s += ", "
		}
		s += op.String()
	}
	return s + "]"
}
