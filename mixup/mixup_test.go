package mixup

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/half"
	"github.com/conveyor-ml/conveyor/pack"
)

// The reference functions below transcribe timm/data/mixup.py: one_hot, mixup_target,
// rand_bbox with cutmix_bbox_and_lam(correct_lam=True), and Mixup._mix_batch, which works
// out of place on x.flip(0) (timm's tensors are NCHW; x[n][c][y][x] here).

// refOneHot is one_hot(target, classes, on, off) for a multi-hot row: on at every label.
func refOneHot(labels [][]int, classes int, smoothing float64) [][]float32 {
	off := smoothing / float64(classes)
	on := 1 - smoothing + off
	out := make([][]float32, len(labels))
	for i, ls := range labels {
		out[i] = make([]float32, classes)
		for c := range out[i] {
			out[i][c] = float32(off)
		}
		for _, l := range ls {
			out[i][l] = float32(on)
		}
	}
	return out
}

// refMixupTarget is mixup_target: y1 * lam + y2 * (1. - lam), y2 the rows flipped, in
// float32 tensor arithmetic.
func refMixupTarget(labels [][]int, classes int, lam, smoothing float64) [][]float32 {
	y1 := refOneHot(labels, classes, smoothing)
	n := len(y1)
	out := make([][]float32, n)
	for i := range y1 {
		out[i] = make([]float32, classes)
		for c := range classes {
			a := float32(y1[i][c] * float32(lam))
			b := float32(y1[n-1-i][c] * float32(1-lam))
			out[i][c] = a + b
		}
	}
	return out
}

// refRandBbox is rand_bbox for given centre draws, then the λ correction.
func refRandBbox(h, w int, lam float64, cy, cx int) (yl, yh, xl, xh int, lamOut float64) {
	ratio := math.Sqrt(1 - lam)
	cutH, cutW := int(float64(h)*ratio), int(float64(w)*ratio)
	clip := func(v, hi int) int { return int(math.Min(math.Max(float64(v), 0), float64(hi))) }
	yl = clip(cy-int(math.Floor(float64(cutH)/2)), h)
	yh = clip(cy+int(math.Floor(float64(cutH)/2)), h)
	xl = clip(cx-int(math.Floor(float64(cutW)/2)), w)
	xh = clip(cx+int(math.Floor(float64(cutW)/2)), w)
	area := (yh - yl) * (xh - xl)
	return yl, yh, xl, xh, 1 - float64(area)/float64(h*w)
}

// refMixBatch is Mixup._mix_batch on a float batch x[n][c][y][x], where round rounds to
// the tensor's dtype after each operation.
func refMixBatch(x [][][][]float32, p Params, round func(float32) float32) [][][][]float32 {
	n := len(x)
	out := clone4(x)
	flipped := clone4(x) // x.flip(0) is a copy
	for i := range n {
		flipped[i] = clone4(x)[n-1-i]
	}
	for i := range n {
		for c := range out[i] {
			for y := range out[i][c] {
				for xx := range out[i][c][y] {
					if p.CutMix {
						if y >= p.Y0 && y < p.Y1 && xx >= p.X0 && xx < p.X1 {
							out[i][c][y][xx] = flipped[i][c][y][xx]
						}
						continue
					}
					fl := round(flipped[i][c][y][xx] * float32(1-p.Lambda)) // x.flip(0).mul_(1. - lam)
					xl := round(x[i][c][y][xx] * float32(p.Lambda))         // x.mul_(lam)
					out[i][c][y][xx] = round(xl + fl)                       // .add_(x_flipped)
				}
			}
		}
	}
	return out
}

func clone4(x [][][][]float32) [][][][]float32 {
	out := make([][][][]float32, len(x))
	for i := range x {
		out[i] = make([][][]float32, len(x[i]))
		for c := range x[i] {
			out[i][c] = make([][]float32, len(x[i][c]))
			for y := range x[i][c] {
				out[i][c][y] = append([]float32(nil), x[i][c][y]...)
			}
		}
	}
	return out
}

// encode writes x in layout and dtype as pack would; decode reads it back.
func encode(x [][][][]float32, layout pack.Layout, dtype pack.DType) []byte {
	n, h, w := len(x), len(x[0][0]), len(x[0][0][0])
	data := make([]byte, n*h*w*3*dtype.Size())
	for i := range n {
		for c := range 3 {
			for y := range h {
				for xx := range w {
					put(data, elemIndex(i, c, y, xx, h, w, layout), dtype, x[i][c][y][xx])
				}
			}
		}
	}
	return data
}

func decodeBatch(data []byte, n, h, w int, layout pack.Layout, dtype pack.DType) [][][][]float32 {
	x := make([][][][]float32, n)
	for i := range n {
		x[i] = make([][][]float32, 3)
		for c := range 3 {
			x[i][c] = make([][]float32, h)
			for y := range h {
				x[i][c][y] = make([]float32, w)
				for xx := range w {
					x[i][c][y][xx] = get(data, elemIndex(i, c, y, xx, h, w, layout), dtype)
				}
			}
		}
	}
	return x
}

func elemIndex(i, c, y, x, h, w int, layout pack.Layout) int {
	if layout == pack.NHWC {
		return ((i*h+y)*w+x)*3 + c
	}
	return ((i*3+c)*h+y)*w + x
}

func put(data []byte, k int, dtype pack.DType, v float32) {
	switch dtype {
	case pack.Uint8:
		data[k] = byte(v)
	case pack.Float32:
		*(*float32)(unsafe.Pointer(&data[4*k])) = v
	case pack.Float16:
		*(*uint16)(unsafe.Pointer(&data[2*k])) = half.Float16(v)
	case pack.BFloat16:
		*(*uint16)(unsafe.Pointer(&data[2*k])) = half.BFloat16(v)
	}
}

func get(data []byte, k int, dtype pack.DType) float32 {
	switch dtype {
	case pack.Uint8:
		return float32(data[k])
	case pack.Float32:
		return *(*float32)(unsafe.Pointer(&data[4*k]))
	case pack.Float16:
		return half.Float16To32(*(*uint16)(unsafe.Pointer(&data[2*k])))
	}
	return half.BFloat16To32(*(*uint16)(unsafe.Pointer(&data[2*k])))
}

// rounder is the dtype's rounding after each tensor operation. uint8 batches are mixed in
// float32 and rounded once at the end (FastCollateMixup's np.rint), which refMixBatch's
// last round does; its intermediate rounds are float32's (none).
func rounder(dtype pack.DType, last bool) func(float32) float32 {
	switch dtype {
	case pack.Float16:
		return func(f float32) float32 { return half.Float16To32(half.Float16(f)) }
	case pack.BFloat16:
		return func(f float32) float32 { return half.BFloat16To32(half.BFloat16(f)) }
	}
	return func(f float32) float32 { return f }
}

// randomBatch makes n samples of h×w×3 values representable in dtype: uint8 values, or
// normalised-looking floats.
func randomBatch(r *rand.Rand, n, h, w int, dtype pack.DType) [][][][]float32 {
	x := make([][][][]float32, n)
	for i := range n {
		x[i] = make([][][]float32, 3)
		for c := range 3 {
			x[i][c] = make([][]float32, h)
			for y := range h {
				x[i][c][y] = make([]float32, w)
				for xx := range w {
					v := float32(r.IntN(256))
					if dtype != pack.Uint8 {
						v = (v/255 - 0.45) / 0.225
					}
					x[i][c][y][xx] = get(encodeOne(v, dtype), 0, dtype)
				}
			}
		}
	}
	return x
}

func encodeOne(v float32, dtype pack.DType) []byte {
	b := make([]byte, 4)
	put(b, 0, dtype, v)
	return b
}

// TestPixelsMatchTimm mixes small batches in every layout and dtype the packer writes,
// and compares them with the transcription of timm's _mix_batch. Float32, float16 and
// bfloat16 must agree bit for bit; uint8 with FastCollateMixup's rounding, also exactly.
func TestPixelsMatchTimm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const h, w = 5, 7
	params := []struct {
		name string
		p    Params
	}{
		{"mixup", Params{Lambda: 0.3}},
		{"mixup-near-1", Params{Lambda: 0.987654321}},
		{"cutmix", cutBox(0.6, h, w, 2, 3)},
		{"cutmix-clipped", cutBox(0.2, h, w, 0, 6)},
		{"unmixed", Params{Lambda: 1}},
	}
	var mx Mixer // one for every case: its tables are rebuilt for each batch's λ and dtype
	for _, layout := range []pack.Layout{pack.NCHW, pack.NHWC} {
		for _, dtype := range []pack.DType{pack.Float32, pack.Uint8, pack.Float16, pack.BFloat16} {
			for _, n := range []int{4, 5, 1} {
				for _, c := range params {
					t.Run(layout.String()+"/"+dtype.String()+"/"+c.name+"/n="+string(rune('0'+n)), func(t *testing.T) {
						x := randomBatch(r, n, h, w, dtype)
						data := encode(x, layout, dtype)
						if err := mx.Pixels(data, n, layout, dtype, h, w, c.p); err != nil {
							t.Fatal(err)
						}
						got := decodeBatch(data, n, h, w, layout, dtype)
						want := refMixBatch(x, c.p, rounder(dtype, false))
						if dtype == pack.Uint8 && !c.p.CutMix && !c.p.Unmixed() {
							for i := range want {
								for ch := range want[i] {
									for y := range want[i][ch] {
										for xx := range want[i][ch][y] {
											want[i][ch][y][xx] = float32(math.RoundToEven(float64(want[i][ch][y][xx])))
										}
									}
								}
							}
						}
						for i := range n {
							for ch := range 3 {
								for y := range h {
									for xx := range w {
										g, wv := got[i][ch][y][xx], want[i][ch][y][xx]
										if g != wv {
											t.Fatalf("sample %d channel %d (%d,%d): got %g, timm %g", i, ch, xx, y, g, wv)
										}
									}
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestCutBoxMatchesTimm compares the box and corrected λ with rand_bbox and
// cutmix_bbox_and_lam for given centres, clipping at every edge included.
func TestCutBoxMatchesTimm(t *testing.T) {
	for _, c := range []struct {
		h, w, cy, cx int
		lam          float64
	}{
		{224, 224, 112, 112, 0.5}, {224, 224, 0, 0, 0.3}, {224, 224, 223, 223, 0.01},
		{7, 5, 3, 2, 0.999}, {160, 240, 10, 200, 0.75}, {3, 3, 1, 1, 0}, {224, 224, 100, 5, 0.9999},
	} {
		p := cutBox(c.lam, c.h, c.w, c.cy, c.cx)
		yl, yh, xl, xh, lam := refRandBbox(c.h, c.w, c.lam, c.cy, c.cx)
		if p.Y0 != yl || p.Y1 != yh || p.X0 != xl || p.X1 != xh || p.Lambda != lam || !p.CutMix {
			t.Errorf("%+v: got box y[%d,%d) x[%d,%d) λ %g, timm y[%d,%d) x[%d,%d) λ %g",
				c, p.Y0, p.Y1, p.X0, p.X1, p.Lambda, yl, yh, xl, xh, lam)
		}
	}
}

// TestTargetsMatchTimm compares smoothed, mixed target rows with mixup_target, single-
// and multi-label rows, even and odd batches.
func TestTargetsMatchTimm(t *testing.T) {
	for _, c := range []struct {
		name     string
		labels   [][]int
		classes  int
		lam, eps float64
	}{
		{"one-hot", [][]int{{0}, {2}, {1}, {2}}, 3, 0.37, 0},
		{"smoothed", [][]int{{0}, {2}, {1}, {4}}, 5, 0.37, 0.1},
		{"smoothed-unmixed", [][]int{{3}, {1}}, 4, 1, 0.2},
		{"odd", [][]int{{0}, {1}, {2}}, 3, 0.81, 0.1},
		{"multi-hot", [][]int{{0, 2}, {}, {1}, {0, 1, 3}}, 4, 0.6, 0.1},
		{"1000-classes", [][]int{{999}, {0}, {500}, {42}, {7}, {7}}, 1000, 0.123456, 0.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.labels)
			off, on := SmoothValues(c.eps, c.classes)
			tg := make([]float32, n*c.classes)
			for i, ls := range c.labels {
				row := tg[i*c.classes : (i+1)*c.classes]
				for k := range row {
					row[k] = off
				}
				for _, l := range ls {
					row[l] = on
				}
			}
			if err := Targets(tg, n, c.classes, Params{Lambda: c.lam}); err != nil {
				t.Fatal(err)
			}
			want := refMixupTarget(c.labels, c.classes, c.lam, c.eps)
			for i := range n {
				for k := range c.classes {
					if g := tg[i*c.classes+k]; g != want[i][k] {
						t.Fatalf("row %d class %d: got %g, timm %g", i, k, g, want[i][k])
					}
				}
			}
			var sum float64
			for _, v := range tg[:c.classes] {
				sum += float64(v)
			}
			if len(c.labels[0]) == 1 && len(c.labels[n-1]) == 1 && math.Abs(sum-1) > 1e-5 {
				t.Errorf("row 0 sums to %g, want 1", sum)
			}
		})
	}
}

func TestSmoothValues(t *testing.T) {
	for _, c := range []struct {
		eps     float64
		classes int
		off, on float32
	}{
		{0, 10, 0, 1},
		{0.1, 10, 0.01, 0.91},
		{0.1, 1000, 0.0001, 0.9001},
		{0.2, 4, 0.05, 0.85},
	} {
		off, on := SmoothValues(c.eps, c.classes)
		if off != c.off || on != c.on {
			t.Errorf("SmoothValues(%g, %d) = %g, %g; want %g, %g", c.eps, c.classes, off, on, c.off, c.on)
		}
	}
}

// TestDrawDistributions checks Draw's parameter distributions against timm's
// _params_per_batch: λ ~ Beta(α, α) (mean 1/2, variance 1/(4(2α+1))), the switch and
// the mixing probability, and CutMix's box (λ corrected by its area; centres uniform).
func TestDrawDistributions(t *testing.T) {
	const draws = 40000
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"mixup-0.2", Options{MixUp: 0.2}},
		{"mixup-1", Options{MixUp: 1}},
		{"mixup-0.8-prob-0.5", Options{MixUp: 0.8, Prob: 0.5}},
		{"cutmix-1", Options{CutMix: 1}},
		{"switch-0.3", Options{MixUp: 0.8, CutMix: 1, SwitchProb: 0.3}},
		{"both-default-switch", Options{MixUp: 2, CutMix: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.EnsureDefaults()
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 11))
			var mixed, cut int
			var s, s2 float64 // MixUp λ
			var nm int
			var cy, cx float64
			for range draws {
				p := o.Draw(r, 224, 160)
				if p.Unmixed() {
					continue
				}
				mixed++
				if p.CutMix {
					cut++
					if p.Y0 < 0 || p.Y1 > 224 || p.X0 < 0 || p.X1 > 160 || p.Y1 < p.Y0 || p.X1 < p.X0 {
						t.Fatalf("box %+v outside 160x224", p)
					}
					if want := 1 - float64((p.Y1-p.Y0)*(p.X1-p.X0))/(224*160); p.Lambda != want {
						t.Fatalf("λ %g, box area gives %g", p.Lambda, want)
					}
					cy += float64(p.Y0+p.Y1) / 2
					cx += float64(p.X0+p.X1) / 2
					continue
				}
				nm++
				s += p.Lambda
				s2 += p.Lambda * p.Lambda
			}
			if got := float64(mixed) / draws; math.Abs(got-o.Prob) > 0.015 {
				t.Errorf("mixed %g of batches, want Prob %g", got, o.Prob)
			}
			wantCut := 0.0
			switch {
			case o.MixUp > 0 && o.CutMix > 0:
				wantCut = o.SwitchProb
			case o.CutMix > 0:
				wantCut = 1
			}
			if got := float64(cut) / float64(mixed); math.Abs(got-wantCut) > 0.015 {
				t.Errorf("CutMix in %g of mixed batches, want %g", got, wantCut)
			}
			if nm > 1000 {
				mean := s / float64(nm)
				v := s2/float64(nm) - mean*mean
				wantV := 1 / (4 * (2*o.MixUp + 1))
				if math.Abs(mean-0.5) > 0.01 || math.Abs(v-wantV) > 0.1*wantV {
					t.Errorf("MixUp λ mean %g variance %g, Beta(%g, %g) has 0.5 and %g", mean, v, o.MixUp, o.MixUp, wantV)
				}
			}
			if cut > 1000 {
				// Clipping pulls a box's centre inwards, symmetrically: the mean stays central.
				if my, mx := cy/float64(cut), cx/float64(cut); math.Abs(my-112) > 3 || math.Abs(mx-80) > 3 {
					t.Errorf("box centres average (%g, %g), want about (80, 112)", mx, my)
				}
			}
		})
	}
}

// TestBetaSmallAlpha checks Beta(α, α) for small α, where the boosted gamma draws may
// underflow: values stay in [0, 1] and pile up at the ends.
func TestBetaSmallAlpha(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, a := range []float64{0.01, 0.1} {
		ends := 0
		for range 10000 {
			v := beta(r, a)
			if !(v >= 0 && v <= 1) {
				t.Fatalf("Beta(%g) drew %g", a, v)
			}
			if v < 0.05 || v > 0.95 {
				ends++
			}
		}
		// P(λ < 0.05 or > 0.95) is about 0.97 for α = 0.01 and 0.74 for α = 0.1.
		if want := map[float64]float64{0.01: 0.97, 0.1: 0.74}[a]; math.Abs(float64(ends)/10000-want) > 0.03 {
			t.Errorf("Beta(%g): %g of draws near 0 or 1, want about %g", a, float64(ends)/10000, want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string // "" for valid
	}{
		{Options{}, ""},
		{Options{MixUp: 0.8, CutMix: 1, Smoothing: 0.1}, ""},
		{Options{MixUp: -1}, "mixup: MixUp α -1 must be ≥ 0"},
		{Options{CutMix: math.NaN()}, "mixup: CutMix α NaN"},
		{Options{MixUp: math.Inf(1)}, "MixUp α +Inf"},
		{Options{SwitchProb: 1.5}, "SwitchProb 1.5 not in [0, 1]"},
		{Options{Prob: -0.5}, "Prob -0.5 not in [0, 1]"},
		{Options{Smoothing: 1}, "Smoothing 1 not in [0, 1)"},
	} {
		o := c.o
		o.EnsureDefaults()
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

// Validate reports every invalid field at once, not only the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := (&Options{MixUp: -1, Prob: 2, Smoothing: 1}).EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("Validate accepted three invalid fields")
	}
	for _, want := range []string{"mixup: MixUp α -1", "mixup: Prob 2", "mixup: Smoothing 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to mention %q", err, want)
		}
	}
}

func TestShortBuffers(t *testing.T) {
	if err := Pixels(make([]byte, 10), 2, pack.NCHW, pack.Uint8, 2, 2, Params{Lambda: 0.5}); err == nil {
		t.Error("Pixels accepted 10 bytes for two 2x2 samples")
	}
	if err := Targets(make([]float32, 5), 2, 3, Params{Lambda: 0.5}); err == nil {
		t.Error("Targets accepted 5 values for two rows of 3")
	}
}

// TestNoAllocations guards the per-batch path: drawing and mixing allocate nothing.
func TestNoAllocations(t *testing.T) {
	o := Options{MixUp: 0.8, CutMix: 1}
	o.EnsureDefaults()
	var pcg rand.PCG
	r := rand.New(&pcg)
	data := make([]byte, 8*32*32*3*4)
	tg := make([]float32, 8*10)
	var m Mixer
	for _, dtype := range []pack.DType{pack.Float32, pack.Uint8, pack.Float16, pack.BFloat16} {
		allocs := testing.AllocsPerRun(20, func() {
			pcg.Seed(1, 2)
			p := o.Draw(r, 32, 32)
			p.Lambda = min(p.Lambda, 0.5)
			_ = m.Pixels(data, 8, pack.NCHW, dtype, 32, 32, p)
			_ = Targets(tg, 8, 10, p)
		})
		if allocs != 0 {
			t.Errorf("%v: %g allocations per batch", dtype, allocs)
		}
	}
}

// TestTablesMatchDirect checks that a batch large enough for the tables (uint8, float16,
// bfloat16) mixes to exactly what element-by-element mixing gives, which
// TestPixelsMatchTimm checks against timm on small batches.
func TestTablesMatchDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const h, w = 64, 64
	for _, n := range []int{6, 7} {
		if n*h*w*3 < tableMin {
			t.Fatalf("a batch of %d samples of %dx%d does not reach the tables", n, w, h)
		}
		for _, dtype := range []pack.DType{pack.Uint8, pack.Float16, pack.BFloat16} {
			for _, lam := range []float64{0.3, 0.987654321, 0.5} {
				data := encode(randomBatch(r, n, h, w, dtype), pack.NCHW, dtype)
				direct := slices.Clone(data)
				var mx Mixer
				if err := mx.Pixels(data, n, pack.NCHW, dtype, h, w, Params{Lambda: lam}); err != nil {
					t.Fatal(err)
				}
				l, m := float32(lam), float32(1-lam)
				switch dtype {
				case pack.Uint8:
					mixUint8Direct(direct, n, h*w*3, l, m)
				case pack.Float16:
					mix16Direct(unsafe.Slice((*uint16)(unsafe.Pointer(&direct[0])), n*h*w*3), n, h*w*3, l, m, half.Float16To32, half.Float16)
				case pack.BFloat16:
					mix16Direct(unsafe.Slice((*uint16)(unsafe.Pointer(&direct[0])), n*h*w*3), n, h*w*3, l, m, half.BFloat16To32, half.BFloat16)
				}
				if !bytes.Equal(data, direct) {
					t.Errorf("%v, %d samples, λ %g: the tables mix differently from element by element", dtype, n, lam)
				}
			}
		}
	}
}
