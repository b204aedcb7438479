package gpu

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/pack"
)

// Caster turns a batch of uint8 NHWC samples (the raw pixels, a quarter of the bytes
// of float32) into the packed form pack.Options describes: float32, float16 or
// bfloat16, NCHW or NHWC, optionally normalised. A ring with a Caster copies the uint8
// batch to the device and converts it there with a kernel loaded from PTX text; the
// result is bit for bit what pack.Packer writes on the host from the same pixels
// (Host, below). A Caster is immutable and safe for concurrent use.
type Caster struct {
	packer *pack.Packer
	o      pack.Options
}

// NewCaster checks a copy of o, which must have a float DType, as pack.NewPacker
// does (a nil o means pack's defaults, which need a Width and Height).
func NewCaster(o *pack.Options) (*Caster, error) {
	p, err := pack.NewPacker(o)
	if err != nil {
		return nil, fmt.Errorf("gpu: converter: %w", err)
	}
	if p.Options().DType == pack.Uint8 {
		return nil, fmt.Errorf("gpu: converter: output dtype uint8 needs no conversion")
	}
	return &Caster{packer: p, o: p.Options()}, nil
}

// Options returns the effective output options (Mean and Std filled in).
func (c *Caster) Options() pack.Options { return c.o }

// InBytes returns the size of n uint8 NHWC input samples.
func (c *Caster) InBytes(n int) int { return n * c.o.Width * c.o.Height * 3 }

// OutBytes returns the size of n converted samples.
func (c *Caster) OutBytes(n int) int { return n * c.packer.SampleBytes() }

// Host converts the uint8 NHWC samples in into out on the CPU, exactly as pack.Packer
// does: this is the reference the device kernel must equal. in must hold a whole number
// of samples and out must be OutBytes of that number.
func (c *Caster) Host(out, in []byte) error {
	per := c.InBytes(1)
	if len(in)%per != 0 || len(out) != c.OutBytes(len(in)/per) {
		return fmt.Errorf("gpu: convert: %d input bytes and %d output bytes are not whole %dx%d samples", len(in), len(out), c.o.Width, c.o.Height)
	}
	outPer := c.packer.SampleBytes()
	for i := range len(in) / per {
		img := &decode.Image{Width: c.o.Width, Height: c.o.Height, Stride: 3 * c.o.Width, Pix: in[i*per : (i+1)*per]}
		if err := c.packer.Pack(out[i*outPer:(i+1)*outPer], img); err != nil {
			return fmt.Errorf("gpu: convert: %w", err)
		}
	}
	return nil
}

// launch is one conversion: pixels pixels (samples × plane) from src to dst.
type launch struct {
	dst, src DevicePtr
	pixels   int64
	plane    int64 // pixels per sample
	conv     *Caster
}
