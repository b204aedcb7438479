package augment

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// refMeta is one entry of a transcription of torchvision's _augmentation_space: the
// magnitudes tensor (nil for a 0-dimensional one) and whether the sign is random.
type refMeta struct {
	name   string
	mags   []float64
	signed bool
}

// refLinspace transcribes torch.linspace(start, end, steps) on the CPU in float32 as
// its AVX2 kernel (compiled with fused multiply-adds) computes it: the scalar path
// start + step*i or end - step*(steps-1-i) rounded once, and the vectorised path for
// the first steps/16*16 elements, where lane j of a vector that starts at element k is
// (the scalar element k) + j*step, rounded twice. TestMagnitudesGolden checks this
// against torch's output; TestAugSpaceAgainstTorchvision checks it against exact
// arithmetic too.
func refLinspace(start, end float64, steps int) []float64 {
	s, e := float32(start), float32(end)
	step := (e - s) / float32(steps-1)
	scalar := func(i int) float32 {
		exact := big.NewFloat(float64(step))
		if i < steps/2 {
			exact.Mul(exact, big.NewFloat(float64(i))).Add(exact, big.NewFloat(float64(s)))
		} else {
			exact.Mul(exact, big.NewFloat(float64(steps-1-i))).Neg(exact).Add(exact, big.NewFloat(float64(e)))
		}
		f, _ := exact.Float32()
		return f
	}
	out := make([]float64, steps)
	for i := range out {
		out[i] = float64(scalar(i))
	}
	for k := 0; k+16 <= steps; k += 8 {
		for j := range 8 {
			out[k+j] = float64(scalar(k) + float32(float32(j)*step))
		}
	}
	return out
}

// refPosterize is 8 - (arange(bins) / ((bins-1)/d)).round().int().
func refPosterizeMags(bins int, d float64) []float64 {
	out := make([]float64, bins)
	for i := range out {
		out[i] = 8 - math.RoundToEven(float64(i)/(float64(bins-1)/d))
	}
	return out
}

// refSpace transcribes RandAugment's (wide false, invert false), TrivialAugmentWide's
// (wide true) and AutoAugment's (invert true) _augmentation_space, in dictionary order.
func refSpace(bins, w, h int, wide, invert bool) []refMeta {
	if wide {
		return []refMeta{
			{"Identity", nil, false},
			{"ShearX", refLinspace(0, 0.99, bins), true},
			{"ShearY", refLinspace(0, 0.99, bins), true},
			{"TranslateX", refLinspace(0, 32, bins), true},
			{"TranslateY", refLinspace(0, 32, bins), true},
			{"Rotate", refLinspace(0, 135, bins), true},
			{"Brightness", refLinspace(0, 0.99, bins), true},
			{"Color", refLinspace(0, 0.99, bins), true},
			{"Contrast", refLinspace(0, 0.99, bins), true},
			{"Sharpness", refLinspace(0, 0.99, bins), true},
			{"Posterize", refPosterizeMags(bins, 6), false},
			{"Solarize", refLinspace(255, 0, bins), false},
			{"AutoContrast", nil, false},
			{"Equalize", nil, false},
		}
	}
	s := []refMeta{
		{"ShearX", refLinspace(0, 0.3, bins), true},
		{"ShearY", refLinspace(0, 0.3, bins), true},
		{"TranslateX", refLinspace(0, 150.0/331.0*float64(w), bins), true},
		{"TranslateY", refLinspace(0, 150.0/331.0*float64(h), bins), true},
		{"Rotate", refLinspace(0, 30, bins), true},
		{"Brightness", refLinspace(0, 0.9, bins), true},
		{"Color", refLinspace(0, 0.9, bins), true},
		{"Contrast", refLinspace(0, 0.9, bins), true},
		{"Sharpness", refLinspace(0, 0.9, bins), true},
		{"Posterize", refPosterizeMags(bins, 4), false},
		{"Solarize", refLinspace(255, 0, bins), false},
		{"AutoContrast", nil, false},
		{"Equalize", nil, false},
	}
	if invert {
		return append(s, refMeta{"Invert", nil, false})
	}
	return append([]refMeta{{"Identity", nil, false}}, s...)
}

func refLookup(space []refMeta, name string) refMeta {
	for _, m := range space {
		if m.name == name {
			return m
		}
	}
	panic("no op " + name)
}

// closeMag reports whether an implementation's float32 magnitude matches the reference's
// (torch's kernel and exact arithmetic may round the last float32 bit differently).
func closeMag(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want))
}

type refStep struct {
	name string
	mag  float64
}

// refRandAugment transcribes RandAugment.forward's draws for one op.
func refRandAugment(r *rand.Rand, magnitude, bins, w, h int) refStep {
	space := refSpace(bins, w, h, false, false)
	m := space[r.IntN(len(space))]
	mag := 0.0
	if m.mags != nil {
		mag = m.mags[magnitude]
	}
	if m.signed && r.IntN(2) == 1 {
		mag = -mag
	}
	return refStep{m.name, mag}
}

// refTrivialAugment transcribes TrivialAugmentWide.forward's draws.
func refTrivialAugment(r *rand.Rand, bins int) refStep {
	space := refSpace(bins, 0, 0, true, false)
	m := space[r.IntN(len(space))]
	mag := 0.0
	if m.mags != nil {
		mag = m.mags[r.IntN(len(m.mags))]
	}
	if m.signed && r.IntN(2) == 1 {
		mag = -mag
	}
	return refStep{m.name, mag}
}

// refAutoPolicies is torchvision's IMAGENET policy as written there.
var refImageNetPolicy = [25][2]struct {
	name string
	p    float64
	bin  int // -1 for None
}{
	{{"Posterize", 0.4, 8}, {"Rotate", 0.6, 9}}, {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, -1}},
	{{"Equalize", 0.8, -1}, {"Equalize", 0.6, -1}}, {{"Posterize", 0.6, 7}, {"Posterize", 0.6, 6}},
	{{"Equalize", 0.4, -1}, {"Solarize", 0.2, 4}}, {{"Equalize", 0.4, -1}, {"Rotate", 0.8, 8}},
	{{"Solarize", 0.6, 3}, {"Equalize", 0.6, -1}}, {{"Posterize", 0.8, 5}, {"Equalize", 1.0, -1}},
	{{"Rotate", 0.2, 3}, {"Solarize", 0.6, 8}}, {{"Equalize", 0.6, -1}, {"Posterize", 0.4, 6}},
	{{"Rotate", 0.8, 8}, {"Color", 0.4, 0}}, {{"Rotate", 0.4, 9}, {"Equalize", 0.6, -1}},
	{{"Equalize", 0.0, -1}, {"Equalize", 0.8, -1}}, {{"Invert", 0.6, -1}, {"Equalize", 1.0, -1}},
	{{"Color", 0.6, 4}, {"Contrast", 1.0, 8}}, {{"Rotate", 0.8, 8}, {"Color", 1.0, 2}},
	{{"Color", 0.8, 8}, {"Solarize", 0.8, 7}}, {{"Sharpness", 0.4, 7}, {"Invert", 0.6, -1}},
	{{"ShearX", 0.6, 5}, {"Equalize", 1.0, -1}}, {{"Color", 0.4, 0}, {"Equalize", 0.6, -1}},
	{{"Equalize", 0.4, -1}, {"Solarize", 0.2, 4}}, {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, -1}},
	{{"Invert", 0.6, -1}, {"Equalize", 1.0, -1}}, {{"Color", 0.6, 4}, {"Contrast", 1.0, 8}},
	{{"Equalize", 0.8, -1}, {"Equalize", 0.6, -1}},
}

// refAutoAugment transcribes AutoAugment.get_params and forward for the ImageNet policy:
// the ops that run, with their signed magnitudes.
func refAutoAugment(r *rand.Rand, w, h int) (policy int, steps []refStep) {
	policy = r.IntN(25)
	probs := [2]float32{r.Float32(), r.Float32()}
	signs := [2]int{r.IntN(2), r.IntN(2)}
	space := refSpace(10, w, h, false, true)
	for i, s := range refImageNetPolicy[policy] {
		if probs[i] <= float32(s.p) { // a float32 tensor against a Python float
			m := refLookup(space, s.name)
			mag := 0.0
			if s.bin >= 0 {
				mag = m.mags[s.bin]
			}
			if m.signed && signs[i] == 0 {
				mag = -mag
			}
			steps = append(steps, refStep{s.name, mag})
		}
	}
	return policy, steps
}

// exactRange is the (start, end) of an op's linspace in _augmentation_space.
func exactRange(name string, wide bool, w, h int) (float64, float64) {
	switch name {
	case "ShearX", "ShearY":
		return 0, map[bool]float64{false: 0.3, true: 0.99}[wide]
	case "TranslateX":
		return 0, map[bool]float64{false: 150.0 / 331.0 * float64(w), true: 32}[wide]
	case "TranslateY":
		return 0, map[bool]float64{false: 150.0 / 331.0 * float64(h), true: 32}[wide]
	case "Rotate":
		return 0, map[bool]float64{false: 30, true: 135}[wide]
	case "Solarize":
		return 255, 0
	}
	return 0, map[bool]float64{false: 0.9, true: 0.99}[wide] // the enhancers
}

func TestAugSpaceAgainstTorchvision(t *testing.T) {
	for _, tt := range []struct {
		wide, invert bool
		bins, w, h   int
	}{
		{false, false, 31, 224, 224}, {false, false, 31, 500, 375}, {false, false, 7, 33, 17},
		{true, false, 31, 0, 0}, {true, false, 10, 0, 0}, {true, false, 2, 0, 0},
		{false, true, 10, 224, 224}, {false, true, 10, 331, 100},
	} {
		space := refSpace(tt.bins, tt.w, tt.h, tt.wide, tt.invert)
		for _, m := range space {
			var op augOp
			for op = 0; op.String() != m.name; op++ {
			}
			for i := range max(1, len(m.mags)) {
				got, signed, hasBins := augSpace(op, tt.wide, tt.bins, i, tt.w, tt.h)
				want := 0.0
				if m.mags != nil {
					want = m.mags[i]
				}
				if got != want || signed != m.signed || hasBins != (m.mags != nil) {
					t.Errorf("%+v %s bin %d: %v, %v, %v; want %v, %v, %v", tt, m.name, i, got, signed, hasBins, want, m.signed, m.mags != nil)
				}
				if m.mags != nil && m.name != "Posterize" {
					lo, hi := exactRange(m.name, tt.wide, tt.w, tt.h)
					exact := lo + (hi-lo)*float64(i)/float64(tt.bins-1)
					if !closeMag(got, exact) {
						t.Errorf("%+v %s bin %d: %v, exactly %v", tt, m.name, i, got, exact)
					}
				}
			}
		}
	}
	// Values worked out by hand for the defaults: RandAugment's bin 9 of 31.
	for _, tt := range []struct {
		op   augOp
		want float64
	}{
		{opShearX, 0.09}, {opRotate, 9}, {opBrightness, 0.27}, {opPosterize, 7}, {opSolarize, 178.5},
		{opTranslateX, 150.0 / 331.0 * 224 * 9 / 30},
	} {
		if got, _, _ := augSpace(tt.op, false, 31, 9, 224, 224); math.Abs(got-tt.want) > 1e-5 {
			t.Errorf("RandAugment %v bin 9 = %v, want %v", tt.op, got, tt.want)
		}
	}
}

// TestPolicyDraws replays each policy's draws with the transcription of torchvision's
// forward on the same random stream, and checks the distributions: ops uniform over 14
// (or sub-policies over 25), signs fair, TrivialAugmentWide's bins uniform.
func TestPolicyDraws(t *testing.T) {
	const n = 14000
	// chi2 returns the chi-square statistic of counts against a uniform distribution.
	chi2 := func(counts []int) float64 {
		var total int
		for _, c := range counts {
			total += c
		}
		e := float64(total) / float64(len(counts))
		var s float64
		for _, c := range counts {
			s += (float64(c) - e) * (float64(c) - e) / e
		}
		return s
	}
	t.Run("RandAugment", func(t *testing.T) {
		o := NewRandAugment(3, 9)
		ops := make([]int, numRandOps)
		var signed, neg int
		for i := range int64(n / 3) {
			c, r := seeded(i), seeded(i).Rand
			for range 3 {
				op, mag := o.draw(c, 224, 160)
				want := refRandAugment(r, 9, 31, 224, 160)
				if op.String() != want.name || !closeMag(mag, want.mag) {
					t.Fatalf("seed %d: drew %v %v, torchvision %v %v", i, op, mag, want.name, want.mag)
				}
				ops[op]++
				if _, s, _ := augSpace(op, false, 31, 9, 224, 160); s {
					signed++
					if mag < 0 {
						neg++
					}
				}
			}
		}
		if x := chi2(ops); x > 34.53 { // 13 degrees of freedom, significance 0.001
			t.Errorf("op counts %v: chi-square %.1f", ops, x)
		}
		if d := math.Abs(float64(neg) - float64(signed)/2); d > 3.3*math.Sqrt(float64(signed)/4) {
			t.Errorf("%d of %d signed magnitudes negative", neg, signed)
		}
	})
	t.Run("TrivialAugmentWide", func(t *testing.T) {
		o := NewTrivialAugmentWide()
		ops := make([]int, numRandOps)
		bins := make([]int, 31)
		for i := range int64(n) {
			c, r := seeded(i), seeded(i).Rand
			op, mag := o.draw(c)
			want := refTrivialAugment(r, 31)
			if op.String() != want.name || !closeMag(mag, want.mag) {
				t.Fatalf("seed %d: drew %v %v, torchvision %v %v", i, op, mag, want.name, want.mag)
			}
			ops[op]++
			if op == opRotate { // bin k is k*4.5 degrees
				bins[int(math.Round(math.Abs(mag)/4.5))]++
			}
		}
		if x := chi2(ops); x > 34.53 {
			t.Errorf("op counts %v: chi-square %.1f", ops, x)
		}
		if x := chi2(bins); x > 59.70 { // 30 degrees of freedom
			t.Errorf("Rotate bin counts %v: chi-square %.1f", bins, x)
		}
	})
	t.Run("AutoAugment", func(t *testing.T) {
		o := NewAutoAugment(ImageNetPolicy)
		policies := make([]int, 25)
		probs := make([]float64, 0, 2*n)
		for i := range int64(n) {
			d := o.draw(seeded(i))
			policy, want := refAutoAugment(seeded(i).Rand, 224, 224)
			if d.policy != policy {
				t.Fatalf("seed %d: sub-policy %d, torchvision %d", i, d.policy, policy)
			}
			// The ops that run and their magnitudes, as Apply decides them.
			var got []refStep
			for k, s := range autoAugmentPolicies[ImageNetPolicy][d.policy] {
				if d.probs[k] <= float32(s.p) {
					mag := 0.0
					if s.bin >= 0 {
						var signed bool
						mag, signed, _ = augSpace(s.op, false, 10, int(s.bin), 224, 224)
						if signed && d.signs[k] == 0 {
							mag = -mag
						}
					}
					got = append(got, refStep{s.op.String(), mag})
				}
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d: runs %v, torchvision %v", i, got, want)
			}
			for k := range got {
				if got[k].name != want[k].name || !closeMag(got[k].mag, want[k].mag) {
					t.Fatalf("seed %d: runs %v, torchvision %v", i, got, want)
				}
			}
			policies[d.policy]++
			probs = append(probs, float64(d.probs[0]), float64(d.probs[1]))
		}
		if x := chi2(policies); x > 51.18 { // 24 degrees of freedom
			t.Errorf("sub-policy counts %v: chi-square %.1f", policies, x)
		}
		slices.Sort(probs)
		var ks float64
		for i, p := range probs {
			ks = max(ks, math.Abs(p-float64(i)/float64(len(probs))), math.Abs(p-float64(i+1)/float64(len(probs))))
		}
		if crit := 1.95 / math.Sqrt(float64(len(probs))); ks > crit {
			t.Errorf("probabilities: KS distance %.4f from uniform, critical %.4f", ks, crit)
		}
	})
}

// refApplyOp applies a torchvision op name with a magnitude through the exported
// functional ops, as _apply_op does, and the shears through refShear.
func refApplyOp(t *testing.T, m *decode.Image, name string, mag float64, fill [3]uint8) *decode.Image {
	c := NewContext()
	switch name {
	case "Identity":
	case "ShearX":
		return refShear(m, false, mag, fill)
	case "ShearY":
		return refShear(m, true, mag, fill)
	case "TranslateX":
		return clone(Affine(c, m, 0, [2]float64{float64(int(mag)), 0}, 1, [2]float64{}, Nearest, fill))
	case "TranslateY":
		return clone(Affine(c, m, 0, [2]float64{0, float64(int(mag))}, 1, [2]float64{}, Nearest, fill))
	case "Rotate":
		return clone(Rotate(c, m, mag, Nearest, fill))
	case "Brightness":
		AdjustBrightness(m, 1+mag)
	case "Color":
		AdjustSaturation(m, 1+mag)
	case "Contrast":
		AdjustContrast(m, 1+mag)
	case "Sharpness":
		AdjustSharpness(m, 1+mag)
	case "Posterize":
		Posterize(m, int(mag))
	case "Solarize":
		Solarize(m, mag)
	case "AutoContrast":
		Autocontrast(m)
	case "Equalize":
		Equalize(m)
	case "Invert":
		Invert(m)
	default:
		t.Fatalf("unknown op %q", name)
	}
	return m
}

// refShear is _apply_op's ShearX (or ShearY, when vertical) by mag with nearest
// interpolation, transcribed without the package's geometry: F.affine's inverse matrix
// for a shear of degrees(atan(mag)) about the top-left corner (center [0, 0]), sampled as
// Pillow's affine_fixed does, with each output pixel's 16.16 fixed-point source position
// computed directly instead of stepped.
func refShear(src *decode.Image, vertical bool, mag float64, fill [3]uint8) *decode.Image {
	pi := math.Pi // CPython's degrees and radians divide by the float64 π at run time
	sh := float64(math.Atan(mag)*(180/pi)) * (pi / 180)
	// _get_inverse_affine_matrix(center=[0, 0], angle=0, translate=[0, 0], scale=1,
	// shear): [d, -b, 0, -c, a, 0] with a = d = 1, and -b = tan(sx) or -c = sin(sy)/cos(sy).
	a := [6]float64{1, math.Tan(sh), 0, 0, 1, 0}
	if vertical {
		a = [6]float64{1, 0, 0, math.Sin(sh) / math.Cos(sh), 1, 0}
	}
	fix := func(v float64) int64 { return int64(math.Floor(float64(v*65536) + 0.5)) }
	a0, a1, a3, a4 := fix(a[0]), fix(a[1]), fix(a[3]), fix(a[4])
	a2 := fix(a[2] + float64(a[0]*0.5) + float64(a[1]*0.5))
	a5 := fix(a[5] + float64(a[3]*0.5) + float64(a[4]*0.5))
	out := &decode.Image{}
	out.Reset(src.Width, src.Height)
	for y := range src.Height {
		for x := range src.Width {
			px := out.Row(y)[3*x : 3*x+3]
			copy(px, fill[:])
			xin := (a2 + int64(y)*a1 + int64(x)*a0) >> 16
			yin := (a5 + int64(y)*a4 + int64(x)*a3) >> 16
			if xin >= 0 && xin < int64(src.Width) && yin >= 0 && yin < int64(src.Height) {
				copy(px, src.Row(int(yin))[3*xin:3*xin+3])
			}
		}
	}
	return out
}

// TestAugOpPixels checks each op of the space at a fixed magnitude against the
// functional op torchvision's _apply_op calls, and the shears and translations against
// a direct nearest-neighbour sampling of Pillow's affine map.
func TestAugOpPixels(t *testing.T) {
	src := photo(t, 7, 60, 44)
	fill := [3]uint8{10, 20, 30}
	for op := range augOp(len(augOpNames)) {
		for _, mag := range []float64{0.27, -0.31, 12.6, -9.9} {
			if op == opPosterize {
				mag = math.Abs(math.Trunc(mag)) / 2
			}
			t.Run(fmt.Sprintf("%v/%g", op, mag), func(t *testing.T) {
				c := NewContext()
				in := clone(src)
				got := applyAugOp(c, in, op, mag, Nearest, fill)
				want := refApplyOp(t, clone(src), op.String(), mag, fill)
				if !equalImages(got, want) {
					t.Fatal("differs from torchvision's functional op")
				}
				// Shears beyond 1 (torchvision's largest is 0.99) magnify the fixed-point
				// rounding; the direct sampling is checked on the realistic ones.
				if op == opTranslateX || op == opTranslateY || (op == opShearX || op == opShearY) && math.Abs(mag) < 1 {
					checkAffineSampling(t, src, got, op, mag, fill)
				}
			})
		}
	}
}

// checkAffineSampling compares a shear or translation with Pillow's nearest-neighbour
// affine transform sampled directly: output pixel (x, y) takes input pixel
// (floor(x+0.5 + s*(y+0.5) - tx), y) for ShearX/TranslateX, with s = tan(atan(mag)) and
// the shear about the top-left corner, or fill where that is outside. Pillow steps
// through the image in fixed point, so a pixel whose source lies within rounding error
// of a pixel edge may differ: at most 0.5% of them.
func checkAffineSampling(t *testing.T, src, got *decode.Image, op augOp, mag float64, fill [3]uint8) {
	s, tr := 0.0, 0.0
	switch op {
	case opShearX, opShearY:
		s = math.Tan(math.Atan(mag))
	default:
		tr = math.Trunc(mag)
	}
	bad := 0
	for y := range src.Height {
		for x := range src.Width {
			u, v := float64(x)+0.5, float64(y)+0.5
			var sx, sy int
			if op == opShearX || op == opTranslateX {
				sx, sy = int(math.Floor(u+s*v-tr)), y
			} else {
				sx, sy = x, int(math.Floor(v+s*u-tr))
			}
			want := fill[:]
			if sx >= 0 && sx < src.Width && sy >= 0 && sy < src.Height {
				want = src.Row(sy)[3*sx : 3*sx+3]
			}
			if string(got.Row(y)[3*x:3*x+3]) != string(want) {
				bad++
			}
		}
	}
	if bad*200 > src.Width*src.Height {
		t.Errorf("%d of %d pixels differ from the direct sampling", bad, src.Width*src.Height)
	}
}

// TestPolicyApply checks each policy's output against the transcribed draws applied
// with the functional ops, for many seeds.
func TestPolicyApply(t *testing.T) {
	src := photo(t, 8, 48, 40)
	fill := [3]uint8{128, 0, 255}
	ra := &RandAugment{NumOps: 2, Magnitude: 9, Fill: fill}
	ta := &TrivialAugmentWide{Fill: fill}
	aa := &AutoAugment{Fill: fill}
	for i := range int64(300) {
		r := seeded(i).Rand
		want := clone(src)
		for range 2 {
			s := refRandAugment(r, 9, 31, src.Width, src.Height)
			want = refApplyOp(t, want, s.name, s.mag, fill)
		}
		got, err := ra.Apply(seeded(i), clone(src))
		if err != nil || !equalImages(got, want) {
			t.Fatalf("RandAugment seed %d: differs from torchvision's draws (%v)", i, err)
		}

		s := refTrivialAugment(seeded(i).Rand, 31)
		want = refApplyOp(t, clone(src), s.name, s.mag, fill)
		if got, err = ta.Apply(seeded(i), clone(src)); err != nil || !equalImages(got, want) {
			t.Fatalf("TrivialAugmentWide seed %d (%v): differs from torchvision's draws (%v)", i, s, err)
		}

		_, steps := refAutoAugment(seeded(i).Rand, src.Width, src.Height)
		want = clone(src)
		for _, s := range steps {
			want = refApplyOp(t, want, s.name, s.mag, fill)
		}
		if got, err = aa.Apply(seeded(i), clone(src)); err != nil || !equalImages(got, want) {
			t.Fatalf("AutoAugment seed %d (%v): differs from torchvision's draws (%v)", i, steps, err)
		}
	}
}

// TestPolicyDeterminism checks that a policy's output depends on the Context's seed
// alone: a reused Context gives what a fresh one gives, and seeds differ.
func TestPolicyDeterminism(t *testing.T) {
	src := photo(t, 10, 64, 48)
	for _, op := range []Op{NewRandAugment(2, 9), NewTrivialAugmentWide(), NewAutoAugment(ImageNetPolicy),
		&RandAugment{NumOps: 4, Magnitude: 30, Interpolation: Bilinear}, NewAutoAugment(SVHNPolicy)} {
		t.Run(op.String(), func(t *testing.T) {
			reused := NewContext()
			distinct := map[string]bool{}
			for i := range int64(60) {
				reused.Seed(1, 0, i)
				a, err := op.Apply(reused, clone(src))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := op.Apply(seeded(i), clone(src))
				if !equalImages(a, b) {
					t.Fatalf("seed %d: a reused Context gives another image", i)
				}
				distinct[string(a.Pix)] = true
			}
			if len(distinct) < 20 {
				t.Errorf("60 seeds gave %d distinct images", len(distinct))
			}
		})
	}
}

func TestPolicyZeroAllocs(t *testing.T) {
	src := photo(t, 11, 96, 80)
	work := clone(src)
	for _, op := range []Op{NewRandAugment(2, 9), NewTrivialAugmentWide(), NewAutoAugment(ImageNetPolicy),
		&RandAugment{NumOps: 3, Magnitude: 20, Interpolation: Bilinear}} {
		t.Run(op.String(), func(t *testing.T) {
			c := NewContext()
			i := int64(0)
			sample := func() {
				i++
				c.Seed(1, 0, i)
				copy(work.Pix, src.Pix)
				if _, err := op.Apply(c, work); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // every op, both buffers
				sample()
			}
			if n := testing.AllocsPerRun(100, sample); n != 0 {
				t.Errorf("%v allocations per sample, want 0", n)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tt := range []struct {
		op   Op
		want string // "" for valid
	}{
		{NewRandAugment(2, 9), ""},
		{NewRandAugment(0, 0), ""},
		{&RandAugment{NumOps: 1, Magnitude: 9, NumMagnitudeBins: 10}, ""},
		{&RandAugment{NumOps: 1, Magnitude: 30}, ""},
		{NewRandAugment(-1, 9), "augment: RandAugment: NumOps -1 must be ≥ 0"},
		{NewRandAugment(2, 31), "augment: RandAugment: Magnitude 31 not in [0, 31)"},
		{NewRandAugment(2, -1), "augment: RandAugment: Magnitude -1 not in [0, 31)"},
		{&RandAugment{NumOps: 1, Magnitude: 0, NumMagnitudeBins: 1}, "augment: RandAugment: NumMagnitudeBins 1 must be ≥ 2"},
		{&RandAugment{NumOps: 1, Magnitude: 5, NumMagnitudeBins: 5}, "augment: RandAugment: Magnitude 5 not in [0, 5)"},
		{&RandAugment{NumOps: 1, Interpolation: 7}, "augment: RandAugment: Interpolation 7"},
		{NewTrivialAugmentWide(), ""},
		{&TrivialAugmentWide{NumMagnitudeBins: 2, Interpolation: Bilinear}, ""},
		{&TrivialAugmentWide{NumMagnitudeBins: -3}, "augment: TrivialAugmentWide: NumMagnitudeBins -3 must be ≥ 2"},
		{&TrivialAugmentWide{Interpolation: -1}, "augment: TrivialAugmentWide: Interpolation -1"},
		{NewAutoAugment(ImageNetPolicy), ""},
		{NewAutoAugment(CIFAR10Policy), ""},
		{NewAutoAugment(SVHNPolicy), ""},
		{NewAutoAugment(3), "augment: AutoAugment: Policy 3 is not ImageNetPolicy, CIFAR10Policy or SVHNPolicy"},
		{&AutoAugment{Interpolation: 3}, "augment: AutoAugment: Interpolation 3"},
	} {
		t.Run(tt.op.String(), func(t *testing.T) {
			err := tt.op.(Validator).Validate()
			_, applyErr := tt.op.Apply(seeded(0), decodetest.Noise(1, 9, 7))
			if tt.want == "" {
				if err != nil || applyErr != nil {
					t.Fatalf("Validate() = %v, Apply: %v; want nil", err, applyErr)
				}
				if w, h := tt.op.(Sizer).OutputSize(9, 7); w != 9 || h != 7 {
					t.Errorf("OutputSize(9, 7) = %d, %d", w, h)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want %q...", err, tt.want)
			}
			if applyErr == nil || applyErr.Error() != err.Error() {
				t.Errorf("Apply error %v, want Validate's", applyErr)
			}
		})
	}
}

func TestPolicyStrings(t *testing.T) {
	for _, tt := range []struct {
		op   Op
		want string
	}{
		{NewRandAugment(2, 9), "RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill=[0 0 0])"},
		{&RandAugment{NumOps: 1, Magnitude: 3, NumMagnitudeBins: 10, Interpolation: Bilinear, Fill: [3]uint8{1, 2, 3}},
			"RandAugment(num_ops=1, magnitude=3, num_magnitude_bins=10, interpolation=bilinear, fill=[1 2 3])"},
		{NewTrivialAugmentWide(), "TrivialAugmentWide(num_magnitude_bins=31, interpolation=nearest, fill=[0 0 0])"},
		{NewAutoAugment(ImageNetPolicy), "AutoAugment(policy=imagenet, interpolation=nearest, fill=[0 0 0])"},
		{NewAutoAugment(CIFAR10Policy), "AutoAugment(policy=cifar10, interpolation=nearest, fill=[0 0 0])"},
	} {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
