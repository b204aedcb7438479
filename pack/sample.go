package pack

import (
	"encoding/binary"
	"fmt"
	"image"
	"math"

	"github.com/conveyor-ml/conveyor/internal/half"
)

// Sample is a view of one packed sample in its batch slot: Width×Height pixels of three
// channels in Layout, each value a little-endian DType, as Packer.Pack writes them. Ops
// that torchvision runs on the normalised tensor (augment.RandomErasing) change the
// packed values through it, in place. A Sample does not own Data; it is valid as long as
// the slot is.
type Sample struct {
	Data          []byte // the slot: Width×Height×3 values of DType; required
	Width, Height int    // the sample's size; required
	Layout        Layout // the order of values; default NCHW
	DType         DType  // the element type; default Float32
}

// Sample returns the view of dst, a slot of SampleBytes bytes that p packs into.
func (p *Packer) Sample(dst []byte) Sample {
	return Sample{Data: dst, Width: p.o.Width, Height: p.o.Height, Layout: p.o.Layout, DType: p.o.DType}
}

// Check reports a Sample whose Data does not hold exactly Width×Height×3 values of DType,
// or whose Layout or DType is unknown.
func (s Sample) Check() error {
	switch {
	case s.Layout != NCHW && s.Layout != NHWC:
		return fmt.Errorf("pack: sample: invalid %v", s.Layout)
	case s.DType.Size() == 0:
		return fmt.Errorf("pack: sample: invalid %v", s.DType)
	case s.Width <= 0 || s.Height <= 0:
		return fmt.Errorf("pack: sample: size %dx%d must be positive", s.Width, s.Height)
	case len(s.Data) != s.Width*s.Height*3*s.DType.Size():
		return fmt.Errorf("pack: sample: %d bytes for a %dx%d %v sample of %d", len(s.Data), s.Width, s.Height, s.DType, s.Width*s.Height*3*s.DType.Size())
	}
	return nil
}

// index returns the element index of channel c of pixel (x, y).
func (s Sample) index(c, x, y int) int {
	if s.Layout == NCHW {
		return (c*s.Height+y)*s.Width + x
	}
	return 3*(y*s.Width+x) + c
}

// Value returns channel c of pixel (x, y) as a float32: the stored value for float
// dtypes, the byte for Uint8.
func (s Sample) Value(c, x, y int) float32 {
	i := s.index(c, x, y)
	switch s.DType {
	case Uint8:
		return float32(s.Data[i])
	case Float32:
		return math.Float32frombits(binary.LittleEndian.Uint32(s.Data[4*i:]))
	case Float16:
		return half.Float16To32(binary.LittleEndian.Uint16(s.Data[2*i:]))
	default:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(s.Data[2*i:])) << 16)
	}
}

// Encode returns v as s.DType stores it, in the low bits: float32 bits, float16 or
// bfloat16 bits rounded to nearest even as Pack rounds, or for Uint8 v rounded to the
// nearest integer (halves to even) and clamped to [0, 255] (NaN gives 0).
func (s Sample) Encode(v float32) uint32 {
	switch s.DType {
	case Uint8:
		if !(v > 0) {
			return 0
		}
		return uint32(math.RoundToEven(float64(min(v, 255))))
	case Float32:
		return math.Float32bits(v)
	case Float16:
		return uint32(half.Float16(v))
	default:
		return uint32(half.BFloat16(v))
	}
}

// put stores encoded value e at element i.
func (s Sample) put(i int, e uint32) {
	switch s.DType.Size() {
	case 1:
		s.Data[i] = uint8(e)
	case 2:
		binary.LittleEndian.PutUint16(s.Data[2*i:], uint16(e))
	default:
		binary.LittleEndian.PutUint32(s.Data[4*i:], e)
	}
}

// Fill sets every value of channel c inside r (clipped to the sample) to v[c], encoded as
// Encode does: torchvision's F.erase with a per-channel value.
func (s Sample) Fill(r image.Rectangle, v [3]float32) {
	r = r.Intersect(image.Rect(0, 0, s.Width, s.Height))
	step := 1 // elements between horizontally adjacent values of a channel
	if s.Layout == NHWC {
		step = 3
	}
	for c := range 3 {
		e := s.Encode(v[c])
		for y := r.Min.Y; y < r.Max.Y; y++ {
			i, end := s.index(c, r.Min.X, y), s.index(c, r.Max.X, y)
			switch s.DType.Size() {
			case 1:
				for ; i < end; i += step {
					s.Data[i] = uint8(e)
				}
			case 2:
				for ; i < end; i += step {
					binary.LittleEndian.PutUint16(s.Data[2*i:], uint16(e))
				}
			default:
				for ; i < end; i += step {
					binary.LittleEndian.PutUint32(s.Data[4*i:], e)
				}
			}
		}
	}
}

// FillFunc sets every value inside r (clipped to the sample) to next(), encoded as Encode
// does, calling next in channel, row, column order whatever the layout, the order of
// torchvision's [C, h, w] noise tensor, so the same stream gives the same values in NCHW
// and NHWC.
func (s Sample) FillFunc(r image.Rectangle, next func() float32) {
	r = r.Intersect(image.Rect(0, 0, s.Width, s.Height))
	for c := range 3 {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				s.put(s.index(c, x, y), s.Encode(next()))
			}
		}
	}
}
