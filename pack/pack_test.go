package pack

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
	"github.com/conveyor-ml/conveyor/internal/half"
)

// roundTable rounds float32 values to a 16-bit format by search: values[k] is the value of
// bit pattern k for every finite non-negative pattern, followed by the pattern of +Inf
// standing for the next step after the largest finite value (IEEE rounds to infinity from
// half a step beyond it).
type roundTable struct {
	values []float64
	isNaN  func(uint16) bool
}

func newFloat16Table() *roundTable {
	var t roundTable
	for k := range 0x7c01 {
		e, m := k>>10, float64(k&0x3ff)
		switch {
		case k == 0x7c00:
			t.values = append(t.values, 65536)
		case e == 0:
			t.values = append(t.values, math.Ldexp(m, -24))
		default:
			t.values = append(t.values, math.Ldexp(1+m/1024, e-15))
		}
	}
	t.isNaN = func(b uint16) bool { return b&0x7c00 == 0x7c00 && b&0x3ff != 0 }
	return &t
}

func newBFloat16Table() *roundTable {
	var t roundTable
	for k := range 0x7f81 {
		if k == 0x7f80 {
			t.values = append(t.values, math.Ldexp(1, 128))
			break
		}
		t.values = append(t.values, float64(math.Float32frombits(uint32(k)<<16)))
	}
	t.isNaN = func(b uint16) bool { return b&0x7f80 == 0x7f80 && b&0x7f != 0 }
	return &t
}

// round returns the bits of the nearest representable value, ties to the even pattern.
func (t *roundTable) round(f float32) (bits uint16, nan bool) {
	if f != f {
		return 0, true
	}
	a := math.Abs(float64(f))
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	last := len(t.values) - 1
	// k is the largest pattern whose value is ≤ a.
	k := sort.Search(len(t.values), func(i int) bool { return t.values[i] > a }) - 1
	if k >= last {
		return sign | uint16(last), false
	}
	lo, hi := t.values[k], t.values[k+1]
	switch {
	case a-lo < hi-a:
	case a-lo > hi-a:
		k++
	case k&1 == 1:
		k++
	}
	return sign | uint16(k), false
}

// testFloats returns edge cases and many random float32 values: random bit patterns
// (every exponent), random values of the sizes that normalised pixels have, and every
// value the ImageNet-normalised lookup tables hold.
func testFloats() []float32 {
	fs := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 65504, -65504, 65519.99, 65520, 65536, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		0x1p-14, 0x1p-24, 0x1p-25, 0x1.000002p-25, 0x1.8p-24, 0x1.8p-25, 0x1p-26, 0x1.ffcp-15,
		1 + 0x1p-11, 1 + 3*0x1p-11, 1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1.000002p-8,
		math.Float32frombits(0x7f7f8000), math.Float32frombits(0x7f7f7fff), math.Float32frombits(0x3f808000),
		math.Float32frombits(0x3f818000), math.Float32frombits(0x00008000), math.Float32frombits(0x7fc00001),
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		fs = append(fs, math.Float32frombits(r.Uint32()))
		fs = append(fs, float32(r.NormFloat64()*3))
		fs = append(fs, float32(r.Float64()*1e-4))
	}
	for c := range 3 {
		for x := range 256 {
			fs = append(fs, (float32(x)/255-ImageNetMean[c])/ImageNetStd[c])
		}
	}
	return fs
}

func TestFloat16Bits(t *testing.T) {
	tab := float16Table()
	for _, f := range testFloats() {
		got := half.Float16(f)
		want, nan := tab.round(f)
		if nan {
			if !tab.isNaN(got) {
				t.Fatalf("half.Float16(NaN %#x) = %#04x, not a NaN", math.Float32bits(f), got)
			}
			continue
		}
		if got != want {
			t.Fatalf("half.Float16(%g = %#x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

func TestBFloat16Bits(t *testing.T) {
	tab := newBFloat16Table()
	for _, f := range testFloats() {
		got := half.BFloat16(f)
		want, nan := tab.round(f)
		if nan {
			if !tab.isNaN(got) {
				t.Fatalf("half.BFloat16(NaN %#x) = %#04x, not a NaN", math.Float32bits(f), got)
			}
			continue
		}
		if got != want {
			t.Fatalf("half.BFloat16(%g = %#x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

// alignedBytes returns n bytes starting at an 8-byte boundary plus off.
func alignedBytes(n, off int) []byte {
	buf := make([]uint64, (n+off)/8+2)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	return b[off : off+n]
}

// element decodes element i of a packed sample as a float64 (or the raw byte for Uint8).
func element(b []byte, d DType, i int) float64 {
	switch d {
	case Uint8:
		return float64(b[i])
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case BFloat16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
	}
	h := binary.LittleEndian.Uint16(b[2*i:])
	return float16Table().values[h&0x7fff] * (1 - 2*float64(h>>15))
}

var float16Table = sync.OnceValue(newFloat16Table)

func TestPackLayouts(t *testing.T) {
	src := decodetest.WithStride(decodetest.Noise(2, 5, 3), 7)
	for _, d := range []DType{Uint8, Float32, Float16, BFloat16} {
		for _, norm := range []bool{false, true} {
			if d == Uint8 && norm {
				continue
			}
			t.Run(fmt.Sprintf("%v/normalize=%t", d, norm), func(t *testing.T) {
				var out [2][]byte
				for li, layout := range []Layout{NCHW, NHWC} {
					p, err := NewPacker(&Options{Width: 5, Height: 3, Layout: layout, DType: d, Normalize: norm})
					if err != nil {
						t.Fatal(err)
					}
					out[li] = alignedBytes(p.SampleBytes(), 0)
					if err := p.Pack(out[li], src); err != nil {
						t.Fatal(err)
					}
					// The unaligned slow path writes the same bytes.
					if d != Uint8 {
						odd := alignedBytes(p.SampleBytes(), 1)
						if err := p.Pack(odd, src); err != nil {
							t.Fatal(err)
						}
						if string(odd) != string(out[li]) {
							t.Errorf("%v: unaligned destination packs differently", layout)
						}
					}
				}
				for y := range 3 {
					for x := range 5 {
						for c := range 3 {
							v := src.Row(y)[3*x+c]
							want := float64(v)
							if d != Uint8 {
								want = float64(float32(v) / 255)
								if norm {
									want = float64((float32(v)/255 - ImageNetMean[c]) / ImageNetStd[c])
								}
								switch d {
								case Float16:
									want = element([]byte{byte(half.Float16(float32(want))), byte(half.Float16(float32(want)) >> 8)}, Float16, 0)
								case BFloat16:
									want = float64(math.Float32frombits(uint32(half.BFloat16(float32(want))) << 16))
								}
							}
							if got := element(out[0], d, c*15+y*5+x); got != want {
								t.Fatalf("NCHW (%d,%d,%d) = %v, want %v", x, y, c, got, want)
							}
							if got := element(out[1], d, (y*5+x)*3+c); got != want {
								t.Fatalf("NHWC (%d,%d,%d) = %v, want %v", x, y, c, got, want)
							}
						}
					}
				}
			})
		}
	}
}

// TestPackNormalizeValues pins a few values to torch's float32 arithmetic:
// torch.tensor([x], dtype=torch.uint8).float().div(255).sub(mean).div(std).
func TestPackNormalizeValues(t *testing.T) {
	tests := []struct {
		opts Options
		x    [3]uint8
		want [3]float32
	}{
		// ToTensor only: x/255.
		{Options{}, [3]uint8{0, 128, 255}, [3]float32{0, 0.5019608, 1}},
		// ImageNet statistics.
		{Options{Normalize: true}, [3]uint8{0, 0, 0}, [3]float32{-2.117904, -2.0357144, -1.8044444}},
		{Options{Normalize: true}, [3]uint8{255, 255, 255}, [3]float32{2.2489083, 2.4285715, 2.64}},
		{Options{Normalize: true}, [3]uint8{124, 116, 104}, [3]float32{0.0055655450, -0.0049019608, 0.0081917211}},
		// Custom statistics: mean 0.5, std 0.5 maps to [-1, 1].
		{Options{Normalize: true, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}, [3]uint8{0, 51, 255}, [3]float32{-1, -0.6, 1}},
	}
	for _, tt := range tests {
		o := tt.opts
		o.Width, o.Height = 1, 1
		p, err := NewPacker(&o)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%v/%v", p, tt.x), func(t *testing.T) {
			out := alignedBytes(p.SampleBytes(), 0)
			img := &decode.Image{Pix: tt.x[:], Width: 1, Height: 1, Stride: 3}
			if err := p.Pack(out, img); err != nil {
				t.Fatal(err)
			}
			mean, std := p.Options().Mean, p.Options().Std
			for c := range 3 {
				got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*c:]))
				// Bit-identical to the float32 formula...
				exact := float32(tt.x[c]) / 255
				if o.Normalize {
					exact = (exact - mean[c]) / std[c]
				}
				if got != exact {
					t.Errorf("channel %d: %v, float32 formula gives %v", c, got, exact)
				}
				// ...and close to the value torch prints.
				if math.Abs(float64(got-tt.want[c])) > 1e-6 {
					t.Errorf("channel %d: %v, want %v", c, got, tt.want[c])
				}
			}
		})
	}
}

func TestPackErrors(t *testing.T) {
	p, err := NewPacker(&Options{Width: 224, Height: 224})
	if err != nil {
		t.Fatal(err)
	}
	dst := alignedBytes(p.SampleBytes(), 0)
	for _, tt := range []struct {
		name string
		dst  []byte
		img  *decode.Image
		want []string
	}{
		{"image size", dst, decodetest.Noise(1, 100, 50), []string{"100x50", "224x224"}},
		{"destination size", dst[:100], decodetest.Noise(1, 224, 224), []string{"100", fmt.Sprint(p.SampleBytes())}},
		{"malformed image", dst, &decode.Image{Pix: make([]uint8, 10), Width: 224, Height: 224, Stride: 672}, []string{"malformed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Pack(tt.dst, tt.img)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "pack: ") {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	for _, o := range []*Options{
		nil,
		{Width: 4},
		{Width: 4, Height: 4, DType: Uint8, Normalize: true},
		{Width: 4, Height: 4, DType: 9},
		{Width: 4, Height: 4, Layout: 2},
		{Width: 4, Height: 4, Normalize: true, Mean: [3]float32{0.5, 0.5, 0.5}},
		{Width: 1 << 16, Height: 1 << 16},
	} {
		if _, err := NewPacker(o); err == nil {
			t.Errorf("NewPacker(%+v): no error", o)
		}
	}
}

// Sizes whose product wraps, and statistics that are not numbers, are refused by
// Validate and NewPacker alike; the largest sample allowed is accepted.
func TestOptionsValidateBounds(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"2^31 squared", Options{Width: 1 << 31, Height: 1 << 31}, "too large"},
		{"2^32 squared uint8", Options{Width: 1 << 32, Height: 1 << 32, DType: Uint8}, "too large"},
		{"over 2 GiB", Options{Width: (1<<31-1)/3 + 1, Height: 1, DType: Uint8}, "too large"},
		{"max int width", Options{Width: math.MaxInt, Height: math.MaxInt}, "too large"},
		{"NaN std", Options{Width: 4, Height: 4, Normalize: true, Mean: ImageNetMean, Std: [3]float32{nan, 1, 1}}, "finite"},
		{"NaN mean", Options{Width: 4, Height: 4, Normalize: true, Mean: [3]float32{0, nan, 0}, Std: ImageNetStd}, "finite"},
		{"infinite mean", Options{Width: 4, Height: 4, Normalize: true, Mean: [3]float32{0, 0, -inf}, Std: ImageNetStd}, "finite"},
		{"infinite std", Options{Width: 4, Height: 4, Normalize: true, Mean: ImageNetMean, Std: [3]float32{1, inf, 1}}, "finite"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want an error containing %q", err, tt.want)
			}
			if _, err := NewPacker(&tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewPacker: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// NaN statistics without Normalize are ignored, as Mean and Std are.
	for _, o := range []Options{
		{Width: (1<<31 - 1) / 3, Height: 1, DType: Uint8},
		{Width: 4, Height: 4, Mean: [3]float32{nan, nan, nan}},
		{Width: 4, Height: 4, Normalize: true},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(%v): %v", o, err)
		}
	}
	// Every problem is reported, not only the first.
	bad := Options{Width: -1, Height: 4, Layout: 2, DType: Uint8, Normalize: true}
	err := bad.Validate()
	for _, want := range []string{"must be positive", "layout", "uint8"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%v): %v, want an error containing %q", bad, err, want)
		}
	}
	if o := (&Options{Width: 4, Height: 4, Normalize: true}).EnsureDefaults(); o.Mean != ImageNetMean || o.Std != ImageNetStd {
		t.Errorf("EnsureDefaults: mean %v, std %v; want ImageNet's", o.Mean, o.Std)
	}
}

func TestParse(t *testing.T) {
	for _, d := range []DType{Uint8, Float32, Float16, BFloat16} {
		for _, s := range []string{d.String(), strings.ToUpper(d.String())} {
			if got, err := ParseDType(s); got != d || err != nil {
				t.Errorf("ParseDType(%q) = %v, %v", s, got, err)
			}
		}
		var back DType
		if b, err := d.MarshalText(); err != nil || back.UnmarshalText(b) != nil || back != d {
			t.Errorf("%v does not round-trip as text", d)
		}
	}
	for alias, d := range map[string]DType{"fp16": Float16, "bf16": BFloat16, "half": Float16, "fp32": Float32, "u8": Uint8} {
		if got, err := ParseDType(alias); got != d || err != nil {
			t.Errorf("ParseDType(%q) = %v, %v", alias, got, err)
		}
	}
	for _, l := range []Layout{NCHW, NHWC} {
		if got, err := ParseLayout(strings.ToLower(l.String())); got != l || err != nil {
			t.Errorf("ParseLayout(%q) = %v, %v", l, got, err)
		}
	}
	if _, err := ParseDType("int8"); err == nil {
		t.Error("ParseDType(int8): no error")
	}
	if _, err := ParseLayout("CHW"); err == nil {
		t.Error("ParseLayout(CHW): no error")
	}
	var zero Options
	if zero.DType != Float32 || zero.Layout != NCHW {
		t.Error("zero Options is not float32 NCHW")
	}
}

// TestPackKernelsMatchTable packs with the float32 kernels and with the table, for
// ImageNet's statistics, none, and random ones, in both layouts, on images whose runs
// end inside a kernel group, whose rows are padded, and one of a single pixel: the bytes
// are the same. On a CPU with the kernels, NewPacker must accept them for the common
// statistics.
func TestPackKernelsMatchTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	stats := []Options{{}, {Normalize: true}, {Normalize: true, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}}
	for range 60 {
		var o Options
		o.Normalize = true
		for c := range 3 {
			o.Mean[c] = float32(rng.Float64()*2 - 0.5)
			o.Std[c] = float32(math.Exp(rng.Float64()*8 - 6)) // 0.0025 to 7.4
			if rng.IntN(4) == 0 {
				o.Std[c] = -o.Std[c]
			}
		}
		stats = append(stats, o)
	}
	images := []*decode.Image{
		decodetest.Noise(1, 224, 224), decodetest.Noise(2, 9, 5), decodetest.Noise(3, 1, 1),
		decodetest.WithStride(decodetest.Noise(4, 13, 7), 5), decodetest.WithStride(decodetest.Noise(5, 16, 3), 1),
	}
	rejected := 0
	for i, o := range stats {
		for _, layout := range []Layout{NCHW, NHWC} {
			for _, img := range images {
				o := o
				o.Width, o.Height, o.Layout, o.DType = img.Width, img.Height, layout, Float32
				p, err := NewPacker(&o)
				if err != nil {
					t.Fatal(err)
				}
				if p.fma == nil {
					if hasFMA && i < 3 {
						t.Fatalf("%v: the kernels were refused", p)
					}
					if img == images[0] {
						rejected++
					}
					continue
				}
				table := *p
				table.fma = nil
				got, want := alignedBytes(p.SampleBytes(), 0), alignedBytes(p.SampleBytes(), 0)
				if err := p.Pack(got, img); err != nil {
					t.Fatal(err)
				}
				if err := table.Pack(want, img); err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("%v: the kernel packs %dx%d (stride %d) differently from the table", p, img.Width, img.Height, img.Stride)
				}
			}
		}
	}
	t.Logf("kernels available: %v; refused for %d of %d statistics and layouts", hasFMA, rejected, 2*len(stats))
	if hasFMA && rejected > len(stats)/10 {
		t.Errorf("the kernels were refused for %d of %d statistics and layouts", rejected, 2*len(stats))
	}
}

// TestPackMirrored packs images mirrored, with the kernel and with the table, in every
// dtype and layout, aligned and not, with row padding and widths that end inside a kernel
// group: the bytes of packing a mirrored copy.
func TestPackMirrored(t *testing.T) {
	images := []*decode.Image{
		decodetest.Noise(1, 224, 9), decodetest.Noise(2, 9, 5), decodetest.Noise(3, 1, 1), decodetest.Noise(6, 8, 2),
		decodetest.WithStride(decodetest.Noise(4, 21, 7), 5), decodetest.WithStride(decodetest.Noise(5, 16, 3), 1),
	}
	mirrored := func(m *decode.Image) *decode.Image {
		c := &decode.Image{Width: m.Width, Height: m.Height, Stride: m.Stride, Pix: append([]byte(nil), m.Pix...)}
		for y := range c.Height {
			row := c.Row(y)
			for i, j := 0, len(row)-3; i < j; i, j = i+3, j-3 {
				for k := range 3 {
					row[i+k], row[j+k] = row[j+k], row[i+k]
				}
			}
		}
		return c
	}
	for _, d := range []DType{Float32, Float16, Uint8} {
		for _, layout := range []Layout{NCHW, NHWC} {
			for _, kernel := range []bool{true, false} {
				for _, img := range images {
					p, err := NewPacker(&Options{Width: img.Width, Height: img.Height, Layout: layout, DType: d, Normalize: d != Uint8})
					if err != nil {
						t.Fatal(err)
					}
					if !kernel {
						p.fma = nil
					}
					want := alignedBytes(p.SampleBytes(), 0)
					if err := p.Pack(want, mirrored(img)); err != nil {
						t.Fatal(err)
					}
					for _, off := range []int{0, 1} {
						got := alignedBytes(p.SampleBytes(), off)
						src := &decode.Image{Width: img.Width, Height: img.Height, Stride: img.Stride, Pix: append([]byte(nil), img.Pix...)}
						if err := p.PackMirrored(got, src); err != nil {
							t.Fatal(err)
						}
						if string(got) != string(want) {
							t.Fatalf("%v, kernel %v, offset %d: %dx%d (stride %d) mirrored differs from packing a mirrored copy", p, kernel && p.fma != nil, off, img.Width, img.Height, img.Stride)
						}
					}
				}
			}
		}
	}
	p, _ := NewPacker(&Options{Width: 4, Height: 4})
	if err := p.PackMirrored(make([]byte, p.SampleBytes()), decodetest.Noise(1, 5, 4)); err == nil {
		t.Error("PackMirrored took an image of another size")
	}
}
