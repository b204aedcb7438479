package mixup

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/half"
	"github.com/conveyor-ml/conveyor/pack"
)

// Options configures batch mixing and label smoothing. The zero value mixes nothing and
// smooths nothing. Field names follow timm's Mixup arguments (mixup_alpha, cutmix_alpha,
// switch_prob, prob, label_smoothing).
type Options struct {
	// MixUp is MixUp's α: λ is drawn from Beta(α, α). 0 turns MixUp off. Default 0.
	MixUp float64
	// CutMix is CutMix's α: λ is drawn from Beta(α, α) and sets the box's side,
	// √(1-λ) of the image's. 0 turns CutMix off. Default 0.
	CutMix float64
	// SwitchProb is, when MixUp and CutMix are both on, the probability that a batch uses
	// CutMix rather than MixUp (timm's switch_prob). 0 means the default, so for MixUp
	// alone leave CutMix at 0. Default 0.5.
	SwitchProb float64
	// Prob is the probability that a batch is mixed at all; an unmixed batch still gets
	// smoothed targets. 0 means the default; for no mixing leave MixUp and CutMix at 0.
	// Default 1.
	Prob float64
	// Smoothing is label smoothing's ε: a target row is ε/classes for every class and
	// 1-ε+ε/classes for the sample's labels, before mixing. Default 0.
	Smoothing float64
}

// EnsureDefaults fills zero fields of o with their defaults and returns o; a nil o is
// replaced by a new Options.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.SwitchProb == 0 {
		o.SwitchProb = 0.5
	}
	if o.Prob == 0 {
		o.Prob = 1
	}
	return o
}

// Validate reports every invalid field of o, joined (errors.Join), each naming its
// field; nil means o is usable. Call EnsureDefaults first, so that unset fields are not
// reported.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mixup: "+format, args...)) }
	if !(o.MixUp >= 0) || math.IsInf(o.MixUp, 0) {
		bad("MixUp α %g must be ≥ 0 and finite", o.MixUp)
	}
	if !(o.CutMix >= 0) || math.IsInf(o.CutMix, 0) {
		bad("CutMix α %g must be ≥ 0 and finite", o.CutMix)
	}
	if !(o.SwitchProb >= 0 && o.SwitchProb <= 1) {
		bad("SwitchProb %g not in [0, 1]", o.SwitchProb)
	}
	if !(o.Prob >= 0 && o.Prob <= 1) {
		bad("Prob %g not in [0, 1]", o.Prob)
	}
	if !(o.Smoothing >= 0 && o.Smoothing < 1) {
		bad("Smoothing %g not in [0, 1)", o.Smoothing)
	}
	return errors.Join(errs...)
}

// Mixing reports whether batches are mixed: MixUp or CutMix is on.
func (o *Options) Mixing() bool { return o.MixUp > 0 || o.CutMix > 0 }

// Dense reports whether targets are soft: mixing or smoothing is on.
func (o *Options) Dense() bool { return o.Mixing() || o.Smoothing > 0 }

// String prints the options, for training logs.
func (o Options) String() string {
	return fmt.Sprintf("mixup=%g cutmix=%g switch=%g prob=%g smoothing=%g", o.MixUp, o.CutMix, o.SwitchProb, o.Prob, o.Smoothing)
}

// Params is one batch's draw.
type Params struct {
	// Lambda is the weight of each sample's own pixels and targets; 1 leaves the batch
	// as it is. For CutMix it is the share of the image outside the box.
	Lambda float64
	// CutMix says the batch pastes the box [Y0, Y1) × [X0, X1) (rows, columns) of its
	// partner into each sample; otherwise MixUp blends whole images.
	CutMix         bool
	Y0, Y1, X0, X1 int
}

// Unmixed reports whether p leaves the batch as it is.
func (p Params) Unmixed() bool { return p.Lambda == 1 }

// Draw draws one batch's Params for images of height×width from r, as timm's
// Mixup._params_per_batch and cutmix_bbox_and_lam (correct_lam=True) do: a draw below
// Prob mixes; with both α on, a draw below SwitchProb picks CutMix; λ ~ Beta(α, α); a
// CutMix box of side √(1-λ) of the image's, centred on a uniform pixel and clipped to
// the image, whose area then sets λ. o must have passed Validate after EnsureDefaults.
func (o *Options) Draw(r *rand.Rand, height, width int) Params {
	p := Params{Lambda: 1}
	if !o.Mixing() || !(r.Float64() < o.Prob) {
		return p
	}
	alpha := o.MixUp
	switch {
	case o.MixUp > 0 && o.CutMix > 0:
		if r.Float64() < o.SwitchProb {
			p.CutMix, alpha = true, o.CutMix
		}
	case o.CutMix > 0:
		p.CutMix, alpha = true, o.CutMix
	}
	p.Lambda = beta(r, alpha)
	if p.Lambda == 1 || !p.CutMix {
		return p
	}
	return cutBox(p.Lambda, height, width, r.IntN(max(height, 1)), r.IntN(max(width, 1)))
}

// cutBox is timm's rand_bbox for centre (cy, cx), and the λ its clipped area gives.
func cutBox(lam float64, height, width, cy, cx int) Params {
	ratio := math.Sqrt(1 - lam)
	ch, cw := int(float64(height)*ratio), int(float64(width)*ratio)
	p := Params{CutMix: true}
	p.Y0 = min(max(cy-ch/2, 0), height)
	p.Y1 = min(max(cy+ch/2, 0), height)
	p.X0 = min(max(cx-cw/2, 0), width)
	p.X1 = min(max(cx+cw/2, 0), width)
	p.Lambda = 1 - float64((p.Y1-p.Y0)*(p.X1-p.X0))/float64(height*width)
	return p
}

// beta draws from Beta(a, a) as the ratio of two Gamma(a) draws.
func beta(r *rand.Rand, a float64) float64 {
	x, y := gamma(r, a), gamma(r, a)
	if x+y == 0 {
		// Both underflowed (a tiny α): Beta(α, α) is then all but certainly 0 or 1.
		return float64(r.Uint64() & 1)
	}
	return x / (x + y)
}

// gamma draws from Gamma(a, 1) by Marsaglia and Tsang's method, boosted for a < 1.
func gamma(r *rand.Rand, a float64) float64 {
	if a < 1 {
		u := r.Float64()
		return gamma(r, a+1) * math.Pow(u, 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// Pixels mixes the n packed samples in data in place, as p says: data holds n samples of
// height×width×3 elements of dtype in layout, as pack writes them. MixUp computes, in
// float32 as torch does, round(round(x_i·λ) + round(x_j·(1-λ))) where round is the dtype's
// rounding (float16 and bfloat16: to nearest even after each operation, as torch's half
// tensors; uint8: to the nearest integer, ties to even, once at the end, as timm's
// FastCollateMixup mixes uint8 batches). CutMix copies the box's elements.
//
// Pixels allocates the tables uint8, float16 and bfloat16 batches are mixed with; a
// loop mixing many batches uses a Mixer, which keeps them.
func Pixels(data []byte, n int, layout pack.Layout, dtype pack.DType, height, width int, p Params) error {
	var m Mixer
	return m.Pixels(data, n, layout, dtype, height, width, p)
}

// Mixer mixes batches' pixels, keeping the tables a batch of uint8, float16 or bfloat16
// is mixed with (about 576 KiB once used) so that mixing allocates nothing. The zero value
// is ready to use. A Mixer is not safe for concurrent use: give each goroutine its own.
type Mixer struct {
	u8  []byte    // [own<<8 | partner]: the mixed uint8 value
	own []float32 // [bits]: round(x·λ) for the 16-bit value with those bits
	oth []float32 // [bits]: round(x·(1-λ))
}

// Pixels is the package's Pixels, with m's tables.
func (m *Mixer) Pixels(data []byte, n int, layout pack.Layout, dtype pack.DType, height, width int, p Params) error {
	size := dtype.Size()
	sample := height * width * 3
	if size == 0 {
		return fmt.Errorf("mixup: dtype %v", dtype)
	}
	if len(data) < n*sample*size {
		return fmt.Errorf("mixup: %d bytes hold fewer than %d samples of %dx%dx3 %v", len(data), n, width, height, dtype)
	}
	if p.Unmixed() || n == 0 {
		return nil
	}
	if p.CutMix {
		cutPixels(data, n, layout, size, height, width, p)
		return nil
	}
	l, w := float32(p.Lambda), float32(1-p.Lambda)
	switch dtype {
	case pack.Float32:
		mixFloat32(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n*sample), n, sample, l, w)
	case pack.Uint8:
		if n*sample < tableMin {
			mixUint8Direct(data[:n*sample], n, sample, l, w)
			break
		}
		m.mixUint8(data[:n*sample], n, sample, l, w)
	case pack.Float16, pack.BFloat16:
		dec, enc, mix := half.Float16To32, half.Float16, mixF16
		if dtype == pack.BFloat16 {
			dec, enc, mix = half.BFloat16To32, half.BFloat16, mixBF16
		}
		x := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(data))), n*sample)
		if n*sample < tableMin {
			mix16Direct(x, n, sample, l, w, dec, enc)
			break
		}
		m.tables16(l, w, dec, enc)
		mix(x, n, sample, m.own, m.oth)
	}
	return nil
}

// tableMin is the number of elements below which a batch of uint8, float16 or bfloat16 is
// mixed element by element: filling a table costs about as much as mixing its 65536
// entries' worth of elements directly, so small (micro-)batches skip it. Both ways give
// the same values.
const tableMin = 1 << 16

// mixUint8Direct is mixUint8 without the table.
func mixUint8Direct(x []byte, n, sample int, l, w float32) {
	mix := func(u, v byte) byte {
		f := float32(float32(float32(u)*l) + float32(float32(v)*w))
		return byte(min(max(math.RoundToEven(float64(f)), 0), 255))
	}
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := a[k], b[k]
			a[k], b[k] = mix(u, v), mix(v, u)
		}
	}
}

// mix16Direct is mixF16 and mixBF16 without the tables: each product rounded to the dtype
// as tables16 rounds it, then the sum.
func mix16Direct(x []uint16, n, sample int, l, w float32, dec func(uint16) float32, enc func(float32) uint16) {
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := dec(a[k]), dec(b[k])
			a[k] = enc(dec(enc(u*l)) + dec(enc(v*w)))
			b[k] = enc(dec(enc(v*l)) + dec(enc(u*w)))
		}
	}
}

// The explicit float32 conversions round each product and sum on its own, as torch's
// separate mul_ and add_ do; they also keep the compiler from fusing them into an FMA.

func mixFloat32(x []float32, n, sample int, l, m float32) {
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := a[k], b[k]
			a[k] = float32(u*l) + float32(v*m)
			b[k] = float32(v*l) + float32(u*m)
		}
	}
}

// mixUint8 mixes through a table of every (own, partner) pair: 65536 entries, computed as
// FastCollateMixup computes each pixel, instead of a float conversion and rounding per
// element (about 5× faster).
func (m *Mixer) mixUint8(x []byte, n, sample int, l, w float32) {
	if m.u8 == nil {
		m.u8 = make([]byte, 1<<16)
	}
	t := m.u8
	for u := range 256 {
		for v := range 256 {
			f := float32(float32(float32(u)*l) + float32(float32(v)*w))
			t[u<<8|v] = byte(min(max(math.RoundToEven(float64(f)), 0), 255))
		}
	}
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := int(a[k]), int(b[k])
			a[k], b[k] = t[u<<8|v], t[v<<8|u]
		}
	}
}

// tables16 fills own and oth with every 16-bit value times λ and times 1-λ, each rounded
// to the dtype, so mixing an element is two loads, an add and one rounding.
func (m *Mixer) tables16(l, w float32, dec func(uint16) float32, enc func(float32) uint16) {
	if m.own == nil {
		m.own, m.oth = make([]float32, 1<<16), make([]float32, 1<<16)
	}
	for h := range 1 << 16 {
		x := dec(uint16(h))
		m.own[h] = dec(enc(x * l))
		m.oth[h] = dec(enc(x * w))
	}
}

// mixF16 and mixBF16 are one loop twice, so that each calls its rounding directly.

func mixF16(x []uint16, n, sample int, own, oth []float32) {
	own, oth = own[:1<<16], oth[:1<<16]
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := a[k], b[k]
			x, y := own[u]+oth[v], own[v]+oth[u]
			hx, ok := half.Float16Normal(x)
			if !ok {
				hx = half.Float16(x)
			}
			hy, ok := half.Float16Normal(y)
			if !ok {
				hy = half.Float16(y)
			}
			a[k], b[k] = hx, hy
		}
	}
}

func mixBF16(x []uint16, n, sample int, own, oth []float32) {
	own, oth = own[:1<<16], oth[:1<<16]
	for i := range (n + 1) / 2 {
		a, b := x[i*sample:(i+1)*sample], x[(n-1-i)*sample:(n-i)*sample]
		b = b[:len(a)]
		for k := range a {
			u, v := a[k], b[k]
			a[k] = half.BFloat16(own[u] + oth[v])
			b[k] = half.BFloat16(own[v] + oth[u])
		}
	}
}

// cutPixels swaps the box between samples i and n-1-i: each gets its partner's box.
func cutPixels(data []byte, n int, layout pack.Layout, size, height, width int, p Params) {
	if p.Y1 <= p.Y0 || p.X1 <= p.X0 {
		return
	}
	sample := height * width * 3 * size
	for i := range n / 2 {
		a, b := data[i*sample:(i+1)*sample], data[(n-1-i)*sample:(n-i)*sample]
		if layout == pack.NHWC {
			row, w := width*3*size, (p.X1-p.X0)*3*size
			for y := p.Y0; y < p.Y1; y++ {
				off := y*row + p.X0*3*size
				swap(a[off:off+w], b[off:off+w])
			}
			continue
		}
		plane, row, w := height*width*size, width*size, (p.X1-p.X0)*size
		for c := range 3 {
			for y := p.Y0; y < p.Y1; y++ {
				off := c*plane + y*row + p.X0*size
				swap(a[off:off+w], b[off:off+w])
			}
		}
	}
}

func swap(a, b []byte) {
	b = b[:len(a)]
	for k := range a {
		a[k], b[k] = b[k], a[k]
	}
}

// SmoothValues returns the off and on values of a target row for classes classes and
// label smoothing eps, as timm's mixup_target computes them: off = ε/classes and
// on = 1-ε+off, in float64, then stored as float32.
func SmoothValues(eps float64, classes int) (off, on float32) {
	o := eps / float64(classes)
	return float32(o), float32(1 - eps + o)
}

// Targets mixes the n target rows of classes values in t in place, as p says:
// y_i = round(round(y_i·λ) + round(y_{n-1-i}·(1-λ))) in float32, as timm's mixup_target
// does with the rows of one-hot (or multi-hot) targets.
func Targets(t []float32, n, classes int, p Params) error {
	if len(t) < n*classes {
		return fmt.Errorf("mixup: %d target values hold fewer than %d rows of %d classes", len(t), n, classes)
	}
	if p.Unmixed() {
		return nil
	}
	mixFloat32(t[:n*classes], n, classes, float32(p.Lambda), float32(1-p.Lambda))
	return nil
}
