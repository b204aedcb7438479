package pack

import (
	"image"
	"math"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/half"
)

func TestFloat16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		v := half.Float16To32(uint16(h))
		if v != v {
			if got := half.Float16(v); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, got)
			}
			continue
		}
		if got := half.Float16(v); got != uint16(h) {
			t.Fatalf("float16 %#04x → %v → %#04x", h, v, got)
		}
	}
	if half.Float16To32(0x3c00) != 1 || half.Float16To32(0xc000) != -2 || half.Float16To32(0x0001) != 1.0/(1<<24) {
		t.Error("Float16To32 of 1, -2 or the smallest subnormal is wrong")
	}
}

func TestSampleFill(t *testing.T) {
	const w, h = 5, 4
	img := &decode.Image{}
	img.Reset(w, h)
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	r := image.Rect(1, 1, 4, 3)
	filled := image.Rect(1, 1, 5, 4) // r's union with (3, 2)-(9, 9), clipped
	v := [3]float32{-1.25, 0.5, 300}
	for _, layout := range []Layout{NCHW, NHWC} {
		for _, dt := range []DType{Float32, Float16, BFloat16, Uint8} {
			p, err := NewPacker(&Options{Width: w, Height: h, Layout: layout, DType: dt, Normalize: dt != Uint8})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, p.SampleBytes())
			if err := p.Pack(buf, img); err != nil {
				t.Fatal(err)
			}
			orig := append([]byte(nil), buf...)
			s := p.Sample(buf)
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			s.Fill(r.Union(image.Rect(3, 2, 9, 9)), v) // clipped to the sample
			so := p.Sample(orig)
			n := 0
			s.FillFunc(image.Rect(0, 3, 2, 4), func() float32 { n++; return float32(n) })
			for c := range 3 {
				for y := range h {
					for x := range w {
						got := s.Value(c, x, y)
						var want float32
						switch {
						case image.Pt(x, y).In(image.Rect(0, 3, 2, 4)):
							want = float32(1 + c*2 + x) // channel, row, column order
						case image.Pt(x, y).In(filled):
							want = v[c]
						default:
							want = so.Value(c, x, y)
						}
						switch dt {
						case Uint8:
							want = float32(math.RoundToEven(float64(min(max(want, 0), 255))))
						case Float16:
							want = half.Float16To32(half.Float16(want))
						case BFloat16:
							want = math.Float32frombits(uint32(half.BFloat16(want)) << 16)
						}
						if got != want {
							t.Fatalf("%v %v: value (%d, %d, %d) = %v, want %v", layout, dt, c, x, y, got, want)
						}
					}
				}
			}
			// Value reads what Pack wrote.
			if dt == Float32 && layout == NCHW {
				if got, want := so.Value(1, 2, 3), p.value(1, img.Pix[3*(3*w+2)+1]); got != want {
					t.Errorf("Value of a packed pixel = %v, want %v", got, want)
				}
			}
		}
	}
}

func TestSampleCheck(t *testing.T) {
	tests := []struct {
		s    Sample
		want string
	}{
		{Sample{Data: make([]byte, 4*3*3*4), Width: 4, Height: 3, DType: Float32}, ""},
		{Sample{Data: make([]byte, 10), Width: 4, Height: 3, DType: Float32}, "pack: sample: 10 bytes for a 4x3 float32 sample of 144"},
		{Sample{Data: make([]byte, 36), Width: 4, Height: 3, DType: 9}, "pack: sample: invalid DType(9)"},
		{Sample{Data: make([]byte, 36), Width: 4, Height: 3, DType: Uint8, Layout: 5}, "pack: sample: invalid Layout(5)"},
		{Sample{Width: 0, Height: 3}, "pack: sample: size 0x3 must be positive"},
	}
	for _, tt := range tests {
		err := tt.s.Check()
		if (err == nil) != (tt.want == "") || err != nil && err.Error() != tt.want {
			t.Errorf("Check() = %v, want %q", err, tt.want)
		}
	}
}
