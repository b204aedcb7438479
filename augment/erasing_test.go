package augment

import (
	"image"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/pack"
)

func TestRandomErasingValidate(t *testing.T) {
	tests := []struct {
		op   *RandomErasing
		want string
	}{
		{NewRandomErasing(0.25), ""},
		{&RandomErasing{P: 1}, ""}, // zero Scale and Ratio: the defaults
		{&RandomErasing{P: 1.5}, "augment: RandomErasing: P 1.5 not in [0, 1]"},
		{&RandomErasing{P: 0.5, Scale: [2]float64{0.5, 1.2}}, "augment: RandomErasing: Scale (0.5, 1.2) must be ascending within [0, 1]"},
		{&RandomErasing{P: 0.5, Scale: [2]float64{0.3, 0.1}}, "augment: RandomErasing: Scale (0.3, 0.1)"},
		{&RandomErasing{P: 0.5, Ratio: [2]float64{0, 1}}, "augment: RandomErasing: Ratio (0, 1) must be finite, positive and ascending"},
		{&RandomErasing{P: 0.5, Ratio: [2]float64{2, 1}}, "augment: RandomErasing: Ratio (2, 1)"},
		{&RandomErasing{P: 0.5, Value: [3]float32{0, float32(math.NaN()), 0}}, "augment: RandomErasing: Value"},
	}
	for _, tt := range tests {
		err := tt.op.Validate()
		if (err == nil) != (tt.want == "") || err != nil && !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%v: Validate() = %v, want %q", tt.op, err, tt.want)
		}
	}
	want := "RandomErasing(p=0.25, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0 0 0])"
	if got := NewRandomErasing(0.25).String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (&RandomErasing{P: 1, Random: true}).String(); !strings.HasSuffix(got, "value=random)") {
		t.Errorf("String() = %q", got)
	}
}

// erasingParamsRef transcribes torchvision's RandomErasing.get_params (the rectangle),
// with r in place of torch's generator; ok is false when it returns the whole image.
func erasingParamsRef(r *rand.Rand, imgH, imgW int, scale, ratio [2]float64) (i, j, h, w int, ok bool) {
	area := float64(imgH * imgW)
	logRatio := [2]float64{math.Log(ratio[0]), math.Log(ratio[1])}
	for range 10 {
		eraseArea := area * (scale[0] + (scale[1]-scale[0])*r.Float64())
		aspect := math.Exp(logRatio[0] + (logRatio[1]-logRatio[0])*r.Float64())
		h := int(math.RoundToEven(math.Sqrt(eraseArea * aspect)))
		w := int(math.RoundToEven(math.Sqrt(eraseArea / aspect)))
		if !(h < imgH && w < imgW) {
			continue
		}
		i := r.IntN(imgH - h + 1)
		j := r.IntN(imgW - w + 1)
		return i, j, h, w, true
	}
	return 0, 0, imgH, imgW, false
}

func TestRandomErasingParamsDistribution(t *testing.T) {
	for _, tt := range []struct {
		w, h         int
		scale, ratio [2]float64
	}{
		{224, 224, DefaultErasingScale, DefaultErasingRatio},
		{40, 12, [2]float64{0.1, 0.6}, [2]float64{0.5, 4}}, // often no fit
	} {
		o := &RandomErasing{P: 1, Scale: tt.scale, Ratio: tt.ratio}
		const n = 5000
		var got, want [5][]float64
		r1, r2 := rand.New(rand.NewPCG(11, 12)), rand.New(rand.NewPCG(13, 14))
		for range n {
			rect, ok := o.Params(r1, tt.w, tt.h)
			if ok && (!rect.In(image.Rect(0, 0, tt.w, tt.h)) || rect.Dx() >= tt.w || rect.Dy() >= tt.h) {
				t.Fatalf("rect %v in a %dx%d image", rect, tt.w, tt.h)
			}
			for k, v := range []float64{float64(rect.Min.Y), float64(rect.Min.X), float64(rect.Dy()), float64(rect.Dx()), b2f(ok)} {
				got[k] = append(got[k], v)
			}
			i, j, h, w, ok := erasingParamsRef(r2, tt.h, tt.w, tt.scale, tt.ratio)
			if !ok {
				i, j, h, w = 0, 0, 0, 0
			}
			for k, v := range []float64{float64(i), float64(j), float64(h), float64(w), b2f(ok)} {
				want[k] = append(want[k], v)
			}
		}
		for k, name := range []string{"top", "left", "height", "width", "found"} {
			if d, crit := ksStatistic(got[k], want[k]), ksCritical(n, n); d > crit {
				t.Errorf("%dx%d %s: KS statistic %.4f > %.4f", tt.w, tt.h, name, d, crit)
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// packed returns a packed w×h sample of a test photo and its view.
func packed(t *testing.T, w, h int, layout pack.Layout, dt pack.DType) (pack.Sample, []byte) {
	t.Helper()
	p, err := pack.NewPacker(&pack.Options{Width: w, Height: h, Layout: layout, DType: dt, Normalize: dt != pack.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, p.SampleBytes())
	if err := p.Pack(buf, photo(t, 9, w, h)); err != nil {
		t.Fatal(err)
	}
	return p.Sample(buf), append([]byte(nil), buf...)
}

func TestRandomErasingApplyTensor(t *testing.T) {
	const w, h = 32, 24
	value := [3]float32{-1.5, 0.25, 2}
	for _, layout := range []pack.Layout{pack.NCHW, pack.NHWC} {
		for _, dt := range []pack.DType{pack.Float32, pack.Float16, pack.BFloat16, pack.Uint8} {
			for _, random := range []bool{false, true} {
				o := &RandomErasing{P: 1, Value: value, Random: random}
				var noise []float64
				erased := 0
				for i := range 200 {
					s, orig := packed(t, w, h, layout, dt)
					c := seeded(int64(i))
					if err := o.ApplyTensor(c, s); err != nil {
						t.Fatal(err)
					}
					c2 := seeded(int64(i))
					c2.Rand.Float64() // the P draw
					rect, ok := o.Params(c2.Rand, w, h)
					if ok {
						erased++
					}
					so := pack.Sample{Data: orig, Width: w, Height: h, Layout: layout, DType: dt}
					for ch := range 3 {
						for y := range h {
							for x := range w {
								got := s.Value(ch, x, y)
								if !ok || !image.Pt(x, y).In(rect) {
									if got != so.Value(ch, x, y) {
										t.Fatalf("%v %v: value (%d, %d, %d) outside %v changed", layout, dt, ch, x, y, rect)
									}
									continue
								}
								if random {
									noise = append(noise, float64(got))
									continue
								}
								if want := float32(s.Encode(value[ch])); dt == pack.Uint8 && got != want {
									t.Fatalf("%v: erased byte %v, want %v", dt, got, want)
								} else if dt == pack.Float32 && got != value[ch] {
									t.Fatalf("%v %v: erased value %v, want %v", layout, dt, got, value[ch])
								}
							}
						}
					}
				}
				if erased < 190 {
					t.Errorf("%v %v: %d of 200 erased with P 1", layout, dt, erased)
				}
				if random {
					mean, sd := meanSD(noise)
					switch dt {
					case pack.Uint8: // uniform bytes: mean 127.5, sd 73.9
						if math.Abs(mean-127.5) > 3 || math.Abs(sd-73.9) > 3 {
							t.Errorf("%v %v: noise mean %.3f sd %.3f, want uniform bytes", layout, dt, mean, sd)
						}
					default:
						if math.Abs(mean) > 0.03 || math.Abs(sd-1) > 0.03 {
							t.Errorf("%v %v: noise mean %.3f sd %.3f, want standard normal", layout, dt, mean, sd)
						}
					}
				}
			}
		}
	}
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)))
}

// The same stream gives the same noise at the same positions in NCHW and NHWC.
func TestRandomErasingLayoutsAgree(t *testing.T) {
	o := &RandomErasing{P: 1, Random: true}
	for i := range 20 {
		a, _ := packed(t, 16, 16, pack.NCHW, pack.Float32)
		b, _ := packed(t, 16, 16, pack.NHWC, pack.Float32)
		if err := o.ApplyTensor(seeded(int64(i)), a); err != nil {
			t.Fatal(err)
		}
		if err := o.ApplyTensor(seeded(int64(i)), b); err != nil {
			t.Fatal(err)
		}
		for c := range 3 {
			for y := range 16 {
				for x := range 16 {
					if a.Value(c, x, y) != b.Value(c, x, y) {
						t.Fatalf("sample %d: NCHW and NHWC differ at (%d, %d, %d)", i, c, x, y)
					}
				}
			}
		}
	}
}

func TestRandomErasingProbability(t *testing.T) {
	o := NewRandomErasing(0.25)
	s, orig := packed(t, 20, 20, pack.NCHW, pack.Float32)
	changed := 0
	for i := range 4000 {
		copy(s.Data, orig)
		if err := o.ApplyTensor(seeded(int64(i)), s); err != nil {
			t.Fatal(err)
		}
		if string(s.Data) != string(orig) {
			changed++
		}
	}
	// Binomial(4000, 0.25): sd 27; a rectangle rounding to zero area changes nothing.
	if changed < 880 || changed > 1100 {
		t.Errorf("%d of 4000 erased with P 0.25", changed)
	}
}

func TestPipelineTensorOps(t *testing.T) {
	erase := &RandomErasing{P: 1, Value: [3]float32{9, 9, 9}}
	flip := NewRandomHorizontalFlip(1)
	// trap fails the test if Apply runs a TensorOp's image Apply (RandomErasing's is the
	// identity and draws nothing, so it could not tell).
	p := Pipeline{NewCenterCrop(8, 8), flip, tensorTrap{t}, erase}
	if err := p.Validate(8, 8); err != nil {
		t.Fatal(err)
	}
	if !p.HasTensorOps() || (Pipeline{flip}).HasTensorOps() {
		t.Error("HasTensorOps is wrong")
	}
	bad := Pipeline{NewCenterCrop(8, 8), erase, flip}
	err := bad.Validate(8, 8)
	if err == nil || !strings.Contains(err.Error(), "augment: op 2 RandomHorizontalFlip(p=1) follows op 1 RandomErasing(") {
		t.Errorf("Validate of an image op after RandomErasing: %v", err)
	}
	// Apply stops before the tensor ops (the trap); ApplyTensor runs them on the packed
	// sample.
	src := photo(t, 1, 12, 10)
	c := seeded(3)
	img, err := p.Apply(c, src)
	if err != nil {
		t.Fatal(err)
	}
	want := clone(img)
	c2 := seeded(3)
	img2, _ := Pipeline{NewCenterCrop(8, 8), flip}.Apply(c2, src)
	if !equalImages(want, img2) {
		t.Error("Apply's image differs from the image ops'")
	}
	pk, _ := pack.NewPacker(&pack.Options{Width: 8, Height: 8})
	buf := make([]byte, pk.SampleBytes())
	if err := pk.Pack(buf, img); err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyTensor(c, pk.Sample(buf)); err != nil {
		t.Fatal(err)
	}
	// The stream continued: the rectangle is the one drawn after the image ops' draws.
	c2.Rand.Float64()
	rect, ok := erase.Params(c2.Rand, 8, 8)
	s := pk.Sample(buf)
	for y := range 8 {
		for x := range 8 {
			if in := ok && image.Pt(x, y).In(rect); in != (s.Value(0, x, y) == 9) {
				t.Fatalf("pixel (%d, %d): erased %t, in %v %t", x, y, s.Value(0, x, y) == 9, rect, in)
			}
		}
	}
	// RandomErasing's image Apply is the identity.
	if out, err := erase.Apply(c, src); out != src || err != nil {
		t.Error("RandomErasing.Apply changed the image")
	}
	if err := erase.ApplyTensor(c, pack.Sample{Data: buf[:10], Width: 8, Height: 8}); err == nil || !strings.HasPrefix(err.Error(), "augment: RandomErasing(") {
		t.Errorf("ApplyTensor on a short sample: %v", err)
	}
}

// tensorTrap is a TensorOp whose image Apply must never run: it fails the test and
// draws, so a run that went on would also shift the random stream.
type tensorTrap struct{ t *testing.T }

func (o tensorTrap) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	o.t.Error("Pipeline.Apply ran a TensorOp's image Apply")
	c.Rand.Float64()
	return src, nil
}

func (tensorTrap) ApplyTensor(*Context, pack.Sample) error { return nil }
func (tensorTrap) String() string                          { return "tensorTrap" }

func TestRandomErasingAllocs(t *testing.T) {
	for _, dt := range []pack.DType{pack.Float32, pack.BFloat16, pack.Uint8} {
		for _, random := range []bool{false, true} {
			o := &RandomErasing{P: 1, Random: random}
			s, _ := packed(t, 64, 64, pack.NCHW, dt)
			c := NewContext()
			i := int64(0)
			if n := testing.AllocsPerRun(50, func() {
				i++
				c.Seed(1, 0, i)
				if err := o.ApplyTensor(c, s); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%v random=%t: %v allocations per sample", dt, random, n)
			}
		}
	}
}
