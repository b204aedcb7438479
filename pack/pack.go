package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/half"
	"github.com/conveyor-ml/conveyor/internal/units"
)

// ImageNet's per-channel statistics, as torchvision's reference scripts use them.
var (
	ImageNetMean = [3]float32{0.485, 0.456, 0.406}
	ImageNetStd  = [3]float32{0.229, 0.224, 0.225}
)

// Options says how a Packer writes samples.
type Options struct {
	Width, Height int    // the sample's size; required
	Layout        Layout // the order of values; default NCHW
	DType         DType  // the element type; default Float32
	// Normalize maps x to (x/255 - Mean)/Std per channel, as torchvision's ToTensor then
	// Normalize do; without it float samples are x/255 (ToTensor alone). Not allowed with
	// Uint8. Default false.
	Normalize bool
	// Mean and Std are the per-channel statistics for Normalize (ignored without it); both
	// zero means ImageNetMean and ImageNetStd. Every value must be finite and every Std
	// non-zero. Default zero.
	Mean, Std [3]float32
}

// Packer writes finished samples into their batch slots in a fixed layout and dtype. It
// precomputes, per channel, the encoded value of each of the 256 pixel values, so packing
// is one table lookup per value. A Packer is safe for concurrent use.
type Packer struct {
	o     Options
	lut8  [3][256]uint8
	lut16 [3][256]uint16
	lut32 [3][256]uint32
	fma   *fmaConsts // the float32 kernels' constants; nil: use lut32
}

// maxSampleBytes bounds one packed sample, width×height×3×the dtype's size: 2 GiB less a byte.
const maxSampleBytes = math.MaxInt32

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new Options holding the defaults. Only Mean and Std have defaults that are
// not zero values: ImageNetMean and ImageNetStd when Normalize is set and both are zero.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Normalize && o.Mean == [3]float32{} && o.Std == [3]float32{} {
		o.Mean, o.Std = ImageNetMean, ImageNetStd
	}
	return o
}

// Validate reports every option NewPacker refuses, joined into one error: a size that is
// not positive or whose sample exceeds maxSampleBytes, an unknown layout or dtype,
// normalising into uint8, and a Mean or Std that is not finite or a Std of zero. It
// takes Mean and Std as EnsureDefaults would fill them.
func (o *Options) Validate() error {
	mean, std := o.Mean, o.Std
	if o.Normalize && mean == [3]float32{} && std == [3]float32{} {
		mean, std = ImageNetMean, ImageNetStd
	}
	var errs []error
	sized := o.Width > 0 && o.Height > 0
	if !sized {
		errs = append(errs, fmt.Errorf("pack: pack size %dx%d: Width and Height must be positive", o.Width, o.Height))
	}
	if o.Layout != NCHW && o.Layout != NHWC {
		errs = append(errs, fmt.Errorf("pack: invalid pack layout %v", o.Layout))
	}
	if o.DType.Size() == 0 {
		errs = append(errs, fmt.Errorf("pack: invalid pack dtype %v", o.DType))
	} else if o.DType == Uint8 && o.Normalize {
		errs = append(errs, fmt.Errorf("pack: cannot normalize into uint8 samples"))
	} else if sized && o.Width > maxSampleBytes/3/o.DType.Size()/o.Height {
		// Divided rather than multiplied: 2^31×2^31×3×4 wraps an int64 to 0.
		errs = append(errs, fmt.Errorf("pack: pack size %dx%d is too large: a %v sample may hold at most %s", o.Width, o.Height, o.DType, units.Bytes(maxSampleBytes)))
	}
	if o.Normalize {
		for c := range 3 {
			m, s := float64(mean[c]), float64(std[c])
			if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(m) || math.IsInf(m, 0) {
				errs = append(errs, fmt.Errorf("pack: normalize mean %v and std %v must be finite, and every std non-zero", mean, std))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// NewPacker returns a Packer for o's effective options; a nil o is refused by Validate
// (Width and Height are required).
func NewPacker(o *Options) (*Packer, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	p := &Packer{o: opts}
	for c := range 3 {
		for x := range 256 {
			v := p.value(c, uint8(x))
			p.lut8[c][x] = uint8(x)
			p.lut32[c][x] = math.Float32bits(v)
			switch opts.DType {
			case Float16:
				p.lut16[c][x] = half.Float16(v)
			case BFloat16:
				p.lut16[c][x] = half.BFloat16(v)
			}
		}
	}
	p.fma = p.newFMAConsts()
	return p, nil
}

// value is the float32 that torchvision produces for value x of channel c: ToTensor's
// float32(x)/255, then Normalize's (t - mean)/std, each rounded to float32 as torch does.
func (p *Packer) value(c int, x uint8) float32 {
	t := float32(x) / 255
	if p.o.Normalize {
		t = (t - p.o.Mean[c]) / p.o.Std[c]
	}
	return t
}

// Options returns the Packer's effective options.
func (p *Packer) Options() Options { return p.o }

// SampleBytes returns the size of one packed sample.
func (p *Packer) SampleBytes() int {
	return p.o.Width * p.o.Height * 3 * p.o.DType.Size()
}

func (p *Packer) String() string { return "Packer(" + p.o.String() + ")" }

// String prints the options, for logs: "224x224 NCHW float32 normalize mean=[...] std=[...]",
// with ImageNet's statistics when Normalize is set and Mean and Std are zero.
func (o Options) String() string {
	s := fmt.Sprintf("%dx%d %v %v", o.Width, o.Height, o.Layout, o.DType)
	if o.Normalize {
		if o.Mean == [3]float32{} && o.Std == [3]float32{} {
			o.Mean, o.Std = ImageNetMean, ImageNetStd
		}
		s += fmt.Sprintf(" normalize mean=%v std=%v", o.Mean, o.Std)
	}
	return s
}

// littleEndian reports whether the machine stores integers least significant byte first;
// only then can Pack store lookup results directly.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// PackMirrored is Pack for img mirrored left to right, as DALI's CropMirrorNormalize
// writes it: for float32 samples the mirror costs nothing (the pixels are read from the
// right); otherwise img is mirrored in place first.
func (p *Packer) PackMirrored(dst []byte, img *decode.Image) error { return p.write(dst, img, true) }

// check reports a destination or image Pack cannot take.
func (p *Packer) check(dst []byte, img *decode.Image) error {
	if img.Width != p.o.Width || img.Height != p.o.Height {
		return fmt.Errorf("pack: pack: image is %dx%d, packer wants %dx%d", img.Width, img.Height, p.o.Width, p.o.Height)
	}
	if len(dst) != p.SampleBytes() {
		return fmt.Errorf("pack: pack: destination has %d bytes, a %dx%d %v sample needs %d", len(dst), p.o.Width, p.o.Height, p.o.DType, p.SampleBytes())
	}
	if len(img.Pix) < (img.Height-1)*img.Stride+3*img.Width || img.Stride < 3*img.Width {
		return fmt.Errorf("pack: pack: malformed %dx%d image (stride %d, %d bytes)", img.Width, img.Height, img.Stride, len(img.Pix))
	}
	return nil
}

// Pack writes img into dst, which must be SampleBytes long, as little-endian values.
// img must be Width×Height. A 224×224 float32 sample takes about 16 µs on one core with
// the AVX2/FMA kernels (amd64), 42 µs with the tables.
func (p *Packer) Pack(dst []byte, img *decode.Image) error { return p.write(dst, img, false) }

// write is Pack, or PackMirrored when mirror is set.
func (p *Packer) write(dst []byte, img *decode.Image, mirror bool) error {
	if err := p.check(dst, img); err != nil {
		return err
	}
	n := len(dst) / p.o.DType.Size()
	ptr := unsafe.Pointer(unsafe.SliceData(dst))
	fast32 := p.o.DType == Float32 && littleEndian && uintptr(ptr)%4 == 0
	if mirror && fast32 {
		p.pack32Mirrored(unsafe.Slice((*uint32)(ptr), n), img)
		return nil
	}
	if mirror {
		img.FlipHorizontal()
	}
	switch p.o.DType {
	case Uint8:
		if p.o.Layout == NHWC {
			w := 3 * img.Width
			for y := range img.Height {
				copy(dst[w*y:w*(y+1)], img.Row(y))
			}
		} else {
			pack(dst, img, &p.lut8, NCHW)
		}
	case Float32:
		if fast32 {
			p.pack32(unsafe.Slice((*uint32)(ptr), n), img)
		} else {
			packBytes(dst, img, p.o.Layout, 4, func(b []byte, c int, x uint8) {
				binary.LittleEndian.PutUint32(b, p.lut32[c][x])
			})
		}
	default:
		if littleEndian && uintptr(ptr)%2 == 0 {
			pack(unsafe.Slice((*uint16)(ptr), n), img, &p.lut16, p.o.Layout)
		} else {
			packBytes(dst, img, p.o.Layout, 2, func(b []byte, c int, x uint8) {
				binary.LittleEndian.PutUint16(b, p.lut16[c][x])
			})
		}
	}
	return nil
}

// pack maps img through lut into out, in layout: about 0.8 ns a pixel.
func pack[T uint8 | uint16 | uint32](out []T, img *decode.Image, lut *[3][256]T, layout Layout) {
	w, h := img.Width, img.Height
	l0, l1, l2 := &lut[0], &lut[1], &lut[2]
	if layout == NHWC {
		for y := range h {
			row := img.Row(y)
			o := out[3*w*y : 3*w*(y+1)]
			o = o[:len(row)]
			for i := 0; i < len(row)-2; i += 3 {
				px, q := row[i:i+3:i+3], o[i:i+3:i+3]
				q[0], q[1], q[2] = l0[px[0]], l1[px[1]], l2[px[2]]
			}
		}
		return
	}
	plane := w * h
	r, g, b := out[:plane], out[plane:2*plane], out[2*plane:3*plane]
	for y := range h {
		row := img.Row(y)
		rr, gg, bb := r[w*y:w*(y+1)], g[w*y:w*(y+1)], b[w*y:w*(y+1)]
		gg, bb = gg[:len(rr)], bb[:len(rr)]
		for x := range rr {
			px := row[3*x : 3*x+3 : 3*x+3]
			rr[x], gg[x], bb[x] = l0[px[0]], l1[px[1]], l2[px[2]]
		}
	}
}

// fmaConsts are the float32 kernels' constants (see pack_amd64.s): 1/255, 255, and
// three vectors each of mean, std and 1/std, one per channel (NCHW) or per group of eight
// samples (NHWC: sample i of vector v is channel (8v+i) mod 3).
type fmaConsts struct {
	r255, c255      [8]float32
	mean, std, rstd [3][8]float32
}

// newFMAConsts returns the kernels' constants for p, or nil when the CPU lacks the
// kernels or they do not compute, for every value of every channel, exactly the table's
// float32 (they do for every mean and std tried; the check makes it certain).
func (p *Packer) newFMAConsts() *fmaConsts {
	if !hasFMA || p.o.DType != Float32 {
		return nil
	}
	k := &fmaConsts{}
	for i := range 8 {
		k.r255[i], k.c255[i] = float32(1.0/255), 255
		for v := range 3 {
			c := v
			if p.o.Layout == NHWC {
				c = (8*v + i) % 3
			}
			mean, std := float32(0), float32(1)
			if p.o.Normalize {
				mean, std = p.o.Mean[c], p.o.Std[c]
			}
			k.mean[v][i], k.std[v][i], k.rstd[v][i] = mean, std, float32(1/float64(std))
		}
	}
	// Every value in every channel: pixel x is (x, x, x), plus the bytes the NCHW
	// kernel reads past the end.
	src := make([]uint8, 3*256+4)
	for x := range 256 {
		src[3*x], src[3*x+1], src[3*x+2] = uint8(x), uint8(x), uint8(x)
	}
	out := make([]float32, 3*256)
	if p.o.Layout == NHWC {
		packNHWC32FMA(&out[0], &src[0], k, 3*256)
	} else {
		packNCHW32FMA(&out[0], &out[256], &out[512], &src[0], k, 256)
	}
	for x := range 256 {
		for c := range 3 {
			i := 3*x + c
			if p.o.Layout == NCHW {
				i = 256*c + x
			}
			if math.Float32bits(out[i]) != p.lut32[c][x] {
				return nil
			}
		}
	}
	return k
}

// pack32 is pack for 32-bit floats, with the FMA kernels where p has them (about 2.5
// times as fast). A run of pixels is a row, or the whole image when its rows are
// contiguous; the kernels take whole groups of 8 pixels (NCHW, reading 4 bytes past the
// group) or 24 samples (NHWC), the table the rest of the run.
func (p *Packer) pack32(out []uint32, img *decode.Image) {
	k, layout := p.fma, p.o.Layout
	if k == nil {
		pack(out, img, &p.lut32, layout)
		return
	}
	w, h := img.Width, img.Height
	runs, n := h, w
	if img.Stride == 3*w {
		runs, n = 1, w*h
	}
	plane := w * h
	l0, l1, l2 := &p.lut32[0], &p.lut32[1], &p.lut32[2]
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(out))), len(out))
	for y := range runs {
		src := img.Pix[y*img.Stride:]
		src = src[:min(len(src), 3*n+4)]
		if layout == NHWC {
			o := out[3*n*y : 3*n*(y+1)]
			m := 3 * n / 24 * 24
			if m > 0 {
				packNHWC32FMA(&f[3*n*y], &src[0], k, m)
			}
			for i := m; i < 3*n; i += 3 {
				px, q := src[i:i+3:i+3], o[i:i+3:i+3]
				q[0], q[1], q[2] = l0[px[0]], l1[px[1]], l2[px[2]]
			}
			continue
		}
		r, g, b := out[n*y:n*(y+1)], out[plane+n*y:plane+n*(y+1)], out[2*plane+n*y:2*plane+n*(y+1)]
		m := max(0, min(n, (len(src)-4)/3)) &^ 7
		if m > 0 {
			packNCHW32FMA(&f[n*y], &f[plane+n*y], &f[2*plane+n*y], &src[0], k, m)
		}
		for x := m; x < n; x++ {
			px := src[3*x : 3*x+3 : 3*x+3]
			r[x], g[x], b[x] = l0[px[0]], l1[px[1]], l2[px[2]]
		}
	}
}

// pack32Mirrored is pack32 for img mirrored left to right: row by row, the kernel (NCHW)
// reading each row's pixels from the right, or the table.
func (p *Packer) pack32Mirrored(out []uint32, img *decode.Image) {
	w, h := img.Width, img.Height
	plane := w * h
	l0, l1, l2 := &p.lut32[0], &p.lut32[1], &p.lut32[2]
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(out))), len(out))
	for y := range h {
		src := img.Row(y)
		if p.o.Layout == NHWC {
			o := out[3*w*y : 3*w*(y+1)]
			for x := range w {
				px, q := src[3*(w-1-x):3*(w-x):3*(w-x)], o[3*x:3*x+3:3*x+3]
				q[0], q[1], q[2] = l0[px[0]], l1[px[1]], l2[px[2]]
			}
			continue
		}
		r, g, b := out[w*y:w*(y+1)], out[plane+w*y:plane+w*(y+1)], out[2*plane+w*y:2*plane+w*(y+1)]
		m := 0
		if p.fma != nil {
			// Outputs 0..m-1 are the row's last m pixels, reversed.
			if m = w &^ 7; m > 0 {
				packNCHW32FMAMirror(&f[w*y], &f[plane+w*y], &f[2*plane+w*y], &src[3*(w-m)], p.fma, m)
			}
		}
		for x := m; x < w; x++ {
			px := src[3*(w-1-x) : 3*(w-x) : 3*(w-x)]
			r[x], g[x], b[x] = l0[px[0]], l1[px[1]], l2[px[2]]
		}
	}
}

// packBytes is the slow path for a destination that is not aligned for its element type
// (or a big-endian machine): put stores channel c's encoding of x at the start of b.
func packBytes(dst []byte, img *decode.Image, layout Layout, size int, put func(b []byte, c int, x uint8)) {
	w, h := img.Width, img.Height
	for y := range h {
		row := img.Row(y)
		for x := range w {
			for c := range 3 {
				i := 3*(y*w+x) + c
				if layout == NCHW {
					i = c*w*h + y*w + x
				}
				put(dst[size*i:], c, row[3*x+c])
			}
		}
	}
}
