package augment

import (
	"image"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

func TestGeomOpsValidate(t *testing.T) {
	tests := []struct {
		op   Op
		want string // "" for valid
	}{
		{NewRandomRotation(30), ""},
		{&RandomRotation{Degrees: [2]float64{10, -10}}, "augment: RandomRotation: Degrees (10, -10) must be finite and ascending"},
		{&RandomRotation{Degrees: [2]float64{0, math.Inf(1)}}, "augment: RandomRotation: Degrees"},
		{&RandomRotation{Interpolation: 7}, "augment: RandomRotation: Interpolation 7"},
		{&RandomRotation{Interpolation: Bicubic}, ""},
		{&RandomAffine{Degrees: [2]float64{-10, 10}, Translate: [2]float64{0.1, 0.2}, Scale: [2]float64{0.8, 1.2}, Shear: [4]float64{-5, 5, -3, 3}}, ""},
		{&RandomAffine{Translate: [2]float64{1.5, 0}}, "augment: RandomAffine: Translate[0] 1.5 not in [0, 1]"},
		{&RandomAffine{Translate: [2]float64{0, -0.1}}, "augment: RandomAffine: Translate[1] -0.1 not in [0, 1]"},
		{&RandomAffine{Scale: [2]float64{0, 1}}, "augment: RandomAffine: Scale (0, 1) must be positive"},
		{&RandomAffine{Scale: [2]float64{2, 1}}, "augment: RandomAffine: Scale (2, 1) must be finite and ascending"},
		{&RandomAffine{Shear: [4]float64{5, -5, 0, 0}}, "augment: RandomAffine: Shear x"},
		{&RandomAffine{Shear: [4]float64{0, 0, 3, 1}}, "augment: RandomAffine: Shear y"},
		{&RandomAffine{Shear: [4]float64{-90, 0, 0, 0}}, "augment: RandomAffine: Shear"},
		{&RandomAffine{Degrees: [2]float64{math.NaN(), 0}}, "augment: RandomAffine: Degrees"},
		{NewRandomPerspective(0.5, 0.5), ""},
		{&RandomPerspective{DistortionScale: 1.2}, "augment: RandomPerspective: DistortionScale 1.2 not in [0, 1]"},
		{&RandomPerspective{P: -1}, "augment: RandomPerspective: P -1 not in [0, 1]"},
		{&RandomPerspective{Interpolation: -1}, "augment: RandomPerspective: Interpolation -1"},
		{NewRandomCrop(32, 32, 4), ""},
		{&RandomCrop{Width: 0, Height: 3}, "augment: RandomCrop: Width 0 must be positive"},
		{&RandomCrop{Width: 3, Height: -1}, "augment: RandomCrop: Height -1 must be positive"},
		{&RandomCrop{Width: 3, Height: 3, Padding: [4]int{0, -1, 0, 0}}, "augment: RandomCrop: Padding [0 -1 0 0] must be ≥ 0"},
		{&RandomCrop{Width: 3, Height: 3, PaddingMode: 9}, "augment: RandomCrop: PaddingMode 9"},
	}
	for _, tt := range tests {
		err := tt.op.(Validator).Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.op, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%v: error %v, want %q...", tt.op, err, tt.want)
		}
		if tt.want != "" {
			if _, err := tt.op.Apply(seeded(0), photo(t, 0, 8, 8)); err == nil {
				t.Errorf("%v: Apply accepted invalid parameters", tt.op)
			}
		}
	}
}

func TestGeomOpsStrings(t *testing.T) {
	tests := []struct {
		op   Op
		want string
	}{
		{NewRandomRotation(15), "RandomRotation(degrees=(-15, 15), interpolation=nearest, expand=false, fill=[0 0 0])"},
		{&RandomAffine{Degrees: [2]float64{-5, 5}, Translate: [2]float64{0.1, 0.1}, Interpolation: Bilinear}, "RandomAffine(degrees=(-5, 5), translate=(0.1, 0.1), interpolation=bilinear, fill=[0 0 0])"},
		{NewRandomPerspective(0.5, 0.5), "RandomPerspective(distortion_scale=0.5, p=0.5, interpolation=bilinear, fill=[0 0 0])"},
		{NewRandomCrop(32, 32, 4), "RandomCrop(32x32, padding=[4 4 4 4], fill=[0 0 0])"},
		{&RandomCrop{Width: 8, Height: 8, PadIfNeeded: true, PaddingMode: PadReflect}, "RandomCrop(8x8, pad_if_needed, padding_mode=reflect)"},
	}
	for _, tt := range tests {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// uniformKS checks that xs look uniform on [lo, hi] with a one-sample KS test at
// significance 0.001.
func uniformKS(t *testing.T, name string, xs []float64, lo, hi float64) {
	t.Helper()
	ref := make([]float64, len(xs))
	r := rand.New(rand.NewPCG(99, 1))
	for i := range ref {
		ref[i] = lo + (hi-lo)*r.Float64()
	}
	if d, crit := ksStatistic(xs, ref), ksCritical(len(xs), len(ref)); d > crit {
		t.Errorf("%s: KS statistic %.4f > %.4f", name, d, crit)
	}
}

func TestRandomRotationParams(t *testing.T) {
	o := &RandomRotation{Degrees: [2]float64{-20, 45}}
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 5000)
	for i := range xs {
		xs[i] = o.Params(r)
		if xs[i] < -20 || xs[i] >= 45 {
			t.Fatalf("angle %v outside [-20, 45)", xs[i])
		}
	}
	uniformKS(t, "angle", xs, -20, 45)

	// Apply rotates by the angle Params draws from the same stream.
	src := photo(t, 1, 30, 20)
	for _, expand := range []bool{false, true} {
		o := &RandomRotation{Degrees: [2]float64{-40, 40}, Expand: expand, Interpolation: Bilinear, Fill: [3]uint8{1, 2, 3}}
		c := seeded(3)
		got, err := o.Apply(c, src)
		if err != nil {
			t.Fatal(err)
		}
		got = clone(got)
		c2 := seeded(3)
		angle := o.Params(c2.Rand)
		want := rotate(c2, src, angle, expand, Bilinear, [3]uint8{1, 2, 3})
		if !equalImages(got, want) {
			t.Errorf("expand=%t: Apply differs from rotate by Params' angle %v", expand, angle)
		}
		if !expand && (got.Width != 30 || got.Height != 20) {
			t.Errorf("size %dx%d, want 30x20", got.Width, got.Height)
		}
	}
}

func TestRotateExpand(t *testing.T) {
	src := photo(t, 2, 40, 30)
	tests := []struct {
		angle float64
		w, h  int
	}{
		{0, 40, 30}, {90, 30, 40}, {-90, 30, 40}, {180, 40, 30},
		// Pillow's ceil(max) - floor(min) of the rotated corners, as CPython computes it.
		{30, 50, 46}, {45, 50, 50}, {-10, 46, 38},
	}
	for _, tt := range tests {
		got := rotate(NewContext(), src, tt.angle, true, Nearest, [3]uint8{})
		// The rotated extent is w|cos|+h|sin| by w|sin|+h|cos|, rounded out at both ends.
		a := tt.angle * math.Pi / 180
		ew := 40*math.Abs(math.Cos(a)) + 30*math.Abs(math.Sin(a))
		eh := 40*math.Abs(math.Sin(a)) + 30*math.Abs(math.Cos(a))
		if got.Width != tt.w || got.Height != tt.h || float64(got.Width) < ew-1e-9 || float64(got.Height) < eh-1e-9 || float64(got.Width) > ew+2 || float64(got.Height) > eh+2 {
			t.Errorf("angle %v: %dx%d, want %dx%d (extent %.2fx%.2f)", tt.angle, got.Width, got.Height, tt.w, tt.h, ew, eh)
		}
		o := &RandomRotation{Degrees: [2]float64{tt.angle, tt.angle}, Expand: true}
		if w, h := o.OutputSize(40, 30); w != tt.w || h != tt.h {
			t.Errorf("angle %v: OutputSize %dx%d, want %dx%d", tt.angle, w, h, tt.w, tt.h)
		}
	}
	if w, h := (&RandomRotation{Degrees: [2]float64{-5, 5}, Expand: true}).OutputSize(40, 30); w != 0 || h != 0 {
		t.Errorf("random expand: OutputSize %dx%d, want unknown", w, h)
	}
	// Its bound (MaxSizer) is not an exact size: Validate must not hold the packed size
	// against it.
	if err := (Pipeline{&RandomRotation{Degrees: [2]float64{-5, 5}, Expand: true}}).Validate(40, 30); err != nil {
		t.Errorf("Validate of a random expanding rotation: %v", err)
	}
}

// affineParamsRef transcribes torchvision's RandomAffine.get_params, with r in place of
// torch's generator.
func affineParamsRef(r *rand.Rand, degrees, translate, scale [2]float64, shears [4]float64, w, h int) (float64, [2]float64, float64, [2]float64) {
	u := func(lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }
	angle := u(degrees[0], degrees[1])
	maxDx, maxDy := translate[0]*float64(w), translate[1]*float64(h)
	tx := math.RoundToEven(u(-maxDx, maxDx))
	ty := math.RoundToEven(u(-maxDy, maxDy))
	s := u(scale[0], scale[1])
	shx := u(shears[0], shears[1])
	shy := u(shears[2], shears[3])
	return angle, [2]float64{tx, ty}, s, [2]float64{shx, shy}
}

func TestRandomAffineParamsDistribution(t *testing.T) {
	o := &RandomAffine{Degrees: [2]float64{-30, 10}, Translate: [2]float64{0.1, 0.3}, Scale: [2]float64{0.7, 1.3}, Shear: [4]float64{-10, 20, -5, 5}}
	const n, w, h = 4000, 50, 20
	var got, want [6][]float64
	r1, r2 := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(7, 8))
	for range n {
		a, tr, s, sh := o.Params(r1, w, h)
		for i, v := range []float64{a, tr[0], tr[1], s, sh[0], sh[1]} {
			got[i] = append(got[i], v)
		}
		if tr[0] != math.Trunc(tr[0]) || math.Abs(tr[0]) > 5 || math.Abs(tr[1]) > 6 {
			t.Fatalf("translation %v is not whole pixels within (5, 6)", tr)
		}
		a, tr, s, sh = affineParamsRef(r2, o.Degrees, o.Translate, o.Scale, o.Shear, w, h)
		for i, v := range []float64{a, tr[0], tr[1], s, sh[0], sh[1]} {
			want[i] = append(want[i], v)
		}
	}
	for i, name := range []string{"angle", "tx", "ty", "scale", "shear x", "shear y"} {
		if d, crit := ksStatistic(got[i], want[i]), ksCritical(n, n); d > crit {
			t.Errorf("%s: KS statistic %.4f > %.4f", name, d, crit)
		}
	}
	// Unset ranges draw nothing and give the identity's parameters.
	a, tr, s, sh := (&RandomAffine{}).Params(r1, w, h)
	if a != 0 || tr != [2]float64{} || s != 1 || sh != [2]float64{} {
		t.Errorf("zero RandomAffine draws %v %v %v %v", a, tr, s, sh)
	}
	// Apply transforms by what Params draws.
	src := photo(t, 3, w, h)
	c := seeded(4)
	out, err := o.Apply(c, src)
	if err != nil {
		t.Fatal(err)
	}
	out = clone(out)
	c2 := seeded(4)
	a, tr, s, sh = o.Params(c2.Rand, w, h)
	if !equalImages(out, Affine(c2, src, a, tr, s, sh, Nearest, [3]uint8{})) {
		t.Error("Apply differs from Affine with Params' draw")
	}
}

func TestPerspectiveCoeffs(t *testing.T) {
	start := [4][2]int{{0, 0}, {99, 0}, {99, 79}, {0, 79}}
	tests := [][4][2]int{
		start,
		{{10, 5}, {90, 2}, {95, 70}, {3, 75}},
		{{24, 19}, {75, 0}, {99, 60}, {0, 79}},
	}
	for _, end := range tests {
		m, ok := perspectiveCoeffs(start, end)
		if !ok {
			t.Fatalf("%v: singular", end)
		}
		for i, p := range end {
			x, y := float64(p[0]), float64(p[1])
			den := m[6]*x + m[7]*y + 1
			sx, sy := (m[0]*x+m[1]*y+m[2])/den, (m[3]*x+m[4]*y+m[5])/den
			// float32 coefficients: about 1e-7 relative, times coordinates up to 100.
			if math.Abs(sx-float64(start[i][0])) > 1e-3 || math.Abs(sy-float64(start[i][1])) > 1e-3 {
				t.Errorf("%v: end point %v maps to (%v, %v), want %v", end, p, sx, sy, start[i])
			}
		}
		for _, v := range m {
			if v != float64(float32(v)) {
				t.Errorf("coefficient %v is not a float32", v)
			}
		}
	}
	if _, ok := perspectiveCoeffs(start, [4][2]int{{0, 0}, {1, 1}, {2, 2}, {3, 3}}); ok {
		t.Error("collinear points solved")
	}
}

func TestRandomPerspective(t *testing.T) {
	const w, h = 41, 30
	o := NewRandomPerspective(0.6, 1)
	// Corner offsets are uniform integers: top-left x in [0, int(0.6·20)] = [0, 12],
	// top-right x in [w-13, w-1], and so on.
	r := rand.New(rand.NewPCG(3, 4))
	counts := map[[2]int]int{}
	const n = 13000
	for range n {
		e := o.Corners(r, w, h)
		counts[[2]int{0, e[0][0]}]++
		counts[[2]int{1, e[1][0]}]++
		counts[[2]int{2, e[2][1]}]++
		if e[0][1] < 0 || e[0][1] > 9 || e[3][1] < h-10 || e[3][1] > h-1 {
			t.Fatalf("corners %v out of range", e)
		}
	}
	for k := range 13 {
		for _, key := range [][2]int{{0, k}, {1, w - 13 + k}} {
			if c := counts[key]; c < n/13-150 || c > n/13+150 {
				t.Errorf("corner %d x=%d drawn %d times of %d, want about %d", key[0], key[1], c, n, n/13)
			}
		}
	}
	for k := range 10 {
		if c := counts[[2]int{2, h - 10 + k}]; c < n/10-180 || c > n/10+180 {
			t.Errorf("bottom-right y=%d drawn %d times, want about %d", h-10+k, c, n/10)
		}
	}

	src := photo(t, 4, w, h)
	// No distortion: the corners stay and the warp is the identity.
	for _, interp := range []Interpolation{Nearest, Bilinear, Bicubic} {
		id := &RandomPerspective{DistortionScale: 0, P: 1, Interpolation: interp}
		got, err := id.Apply(seeded(1), src)
		if err != nil || !equalImages(got, src) || got == src {
			t.Errorf("%v: zero distortion changed the image (err %v)", interp, err)
		}
	}
	// P: the fraction of warped samples.
	half := NewRandomPerspective(0.5, 0.3)
	warped := 0
	c := NewContext()
	for i := range 2000 {
		c.Seed(1, 0, int64(i))
		got, _ := half.Apply(c, src)
		if got != src {
			warped++
		}
	}
	if warped < 540 || warped > 660 {
		t.Errorf("%d of 2000 warped with P 0.3", warped)
	}
	// Apply samples as the generic transform with the drawn corners' coefficients.
	c1, c2 := seeded(7), seeded(7)
	got, _ := o.Apply(c1, src)
	got = clone(got)
	c2.Rand.Float64()
	e := o.Corners(c2.Rand, w, h)
	m, _ := perspectiveCoeffs([4][2]int{{0, 0}, {w - 1, 0}, {w - 1, h - 1}, {0, h - 1}}, e)
	want := &decode.Image{}
	want.Reset(w, h)
	for y := range h {
		for x := range w {
			xin, yin := float64(x)+0.5, float64(y)+0.5
			den := m[6]*xin + m[7]*yin + 1
			bilinear(want.Pix[3*(y*w+x):3*(y*w+x)+3], src, (m[0]*xin+m[1]*yin+m[2])/den, (m[3]*xin+m[4]*yin+m[5])/den)
		}
	}
	if mean, worst := pixelDiff(t, got, want); mean > 0.01 || worst > 1 {
		t.Errorf("warp differs from the reference: mean %.3f, worst %d", mean, worst)
	}
}

// padRef pads src as numpy.pad does in mode (constant with fill), building the padded
// image, for comparison with RandomCrop's index arithmetic.
func padRef(src *decode.Image, pad [4]int, mode PaddingMode, fill [3]uint8) *decode.Image {
	w, h := src.Width+pad[0]+pad[2], src.Height+pad[1]+pad[3]
	out := &decode.Image{}
	out.Reset(w, h)
	// numpy pads iteratively: each step mirrors or repeats what is already there.
	idx := func(p, n int) int {
		for p < 0 || p >= n {
			switch mode {
			case PadConstant:
				return -1
			case PadEdge:
				p = min(max(p, 0), n-1)
			case PadReflect:
				if n == 1 {
					return 0
				}
				if p < 0 {
					p = -p
				} else {
					p = 2*(n-1) - p
				}
			case PadSymmetric:
				if p < 0 {
					p = -p - 1
				} else {
					p = 2*n - 1 - p
				}
			}
		}
		return p
	}
	for y := range h {
		for x := range w {
			sx, sy := idx(x-pad[0], src.Width), idx(y-pad[1], src.Height)
			o := out.Pix[y*out.Stride+3*x:]
			if sx < 0 || sy < 0 {
				copy(o, fill[:])
			} else {
				copy(o, src.Pix[sy*src.Stride+3*sx:sy*src.Stride+3*sx+3])
			}
		}
	}
	return out
}

func TestRandomCropPadding(t *testing.T) {
	src := photo(t, 5, 7, 5)
	// Reflections farther than the image is long, as numpy's repeated reflection.
	for _, mode := range []PaddingMode{PadConstant, PadEdge, PadReflect, PadSymmetric} {
		for _, pad := range [][4]int{{1, 2, 3, 4}, {0, 0, 0, 0}, {12, 9, 15, 11}} {
			o := &RandomCrop{Width: 6, Height: 4, Padding: pad, PaddingMode: mode, Fill: [3]uint8{7, 8, 9}}
			ref := padRef(src, pad, mode, o.Fill)
			for i := range 30 {
				c := seeded(int64(i))
				got, err := o.Apply(c, src)
				if err != nil {
					t.Fatal(err)
				}
				c2 := seeded(int64(i))
				rect, _ := o.Params(c2.Rand, src.Width, src.Height)
				want := &decode.Image{}
				want.Reset(6, 4)
				for y := range 4 {
					o := (rect.Min.Y+pad[1]+y)*ref.Stride + 3*(rect.Min.X+pad[0])
					copy(want.Row(y), ref.Pix[o:o+18])
				}
				if !equalImages(got, want) {
					t.Fatalf("%v pad %v rect %v: crop differs from numpy-style padding", mode, pad, rect)
				}
			}
		}
	}
}

func TestRandomCropParams(t *testing.T) {
	tests := []struct {
		o          RandomCrop
		w, h       int
		rects      int // distinct positions
		err        bool
		xmin, ymin int // the smallest offset
	}{
		{RandomCrop{Width: 4, Height: 3}, 7, 5, 4 * 3, false, 0, 0},
		{RandomCrop{Width: 4, Height: 3, Padding: [4]int{1, 2, 0, 0}}, 7, 5, 5 * 5, false, -1, -2},
		{RandomCrop{Width: 7, Height: 5}, 7, 5, 1, false, 0, 0},
		{RandomCrop{Width: 8, Height: 5}, 7, 5, 0, true, 0, 0},
		// pad_if_needed pads the missing 3 columns on both sides: 13 wide, 4 positions.
		{RandomCrop{Width: 10, Height: 5, PadIfNeeded: true}, 7, 5, 4, false, -3, 0},
		{RandomCrop{Width: 7, Height: 6, PadIfNeeded: true}, 7, 5, 2, false, 0, -1},
		// Padding first, then what is still missing.
		{RandomCrop{Width: 10, Height: 5, PadIfNeeded: true, Padding: [4]int{1, 0, 1, 0}}, 7, 5, 2, false, -2, 0},
	}
	for _, tt := range tests {
		seen := map[image.Point]int{}
		r := rand.New(rand.NewPCG(1, 1))
		const n = 6000
		for range n {
			rect, err := tt.o.Params(r, tt.w, tt.h)
			if tt.err {
				if err == nil || !strings.Contains(err.Error(), "augment: RandomCrop") {
					t.Fatalf("%v: error %v", &tt.o, err)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rect.Dx() != tt.o.Width || rect.Dy() != tt.o.Height {
				t.Fatalf("%v: rect %v", &tt.o, rect)
			}
			seen[rect.Min]++
		}
		if tt.err {
			continue
		}
		if len(seen) != tt.rects {
			t.Errorf("%v: %d positions, want %d", &tt.o, len(seen), tt.rects)
		}
		least := image.Pt(1<<30, 1<<30)
		for p, k := range seen {
			least.X, least.Y = min(least.X, p.X), min(least.Y, p.Y)
			if e := float64(n) / float64(tt.rects); math.Abs(float64(k)-e) > 5*math.Sqrt(e) {
				t.Errorf("%v: position %v drawn %d times, want about %.0f", &tt.o, p, k, e)
			}
		}
		if least != image.Pt(tt.xmin, tt.ymin) {
			t.Errorf("%v: smallest offset %v, want (%d, %d)", &tt.o, least, tt.xmin, tt.ymin)
		}
	}
}

func TestGeomOpsAllocs(t *testing.T) {
	src := photo(t, 6, 64, 48)
	ops := []Op{
		&RandomRotation{Degrees: [2]float64{-30, 30}, Interpolation: Bilinear},
		&RandomRotation{Degrees: [2]float64{-30, 30}, Expand: true},
		&RandomRotation{Degrees: [2]float64{-30, 30}, Interpolation: Bicubic},
		&RandomAffine{Degrees: [2]float64{-10, 10}, Translate: [2]float64{0.1, 0.1}, Scale: [2]float64{0.9, 1.1}, Shear: [4]float64{-5, 5, -5, 5}},
		NewRandomPerspective(0.5, 1),
		&RandomCrop{Width: 60, Height: 60, PadIfNeeded: true, Padding: [4]int{4, 4, 4, 4}, PaddingMode: PadReflect},
	}
	for _, op := range ops {
		c := NewContext()
		run := func() {
			for i := range 4 {
				c.Seed(1, 0, int64(i))
				if _, err := op.Apply(c, src); err != nil {
					t.Fatal(err)
				}
			}
		}
		run() // warm: the buffers grow to the largest output
		c.Seed(1, 0, 0)
		if n := testing.AllocsPerRun(10, run); n != 0 {
			t.Errorf("%v: %v allocations per run, want 0", op, n)
		}
	}
}

// TestRotationMaxOutputSize checks RandomRotation's bound on its expanded size against
// Pillow's sizes (expandedSize) over each range's angles and smaller inputs, and that the
// bound is no more than two pixels loose.
func TestRotationMaxOutputSize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		lo, hi float64
		w, h   int
	}{
		{-10, 10, 400, 300}, {-45, 45, 224, 224}, {-180, 180, 100, 10}, {30, 40, 640, 480},
		{0, 0, 40, 30}, {85, 95, 7, 200}, {-1000, 1000, 33, 45}, {170, 200, 1, 1}, {-5, 5, 1, 5000},
	} {
		o := &RandomRotation{Degrees: [2]float64{tc.lo, tc.hi}, Expand: true}
		mw, mh := o.MaxOutputSize(tc.w, tc.h)
		bw, bh := 0, 0
		angles := []float64{tc.lo, tc.hi}
		for range 20000 {
			angles = append(angles, tc.lo+(tc.hi-tc.lo)*r.Float64())
		}
		// The diagonals' angles and the transposes, where they lie in the range.
		phi := math.Atan2(float64(tc.h), float64(tc.w)) * 180 / math.Pi
		for _, a := range []float64{phi, -phi, 90 - phi, phi - 90, 180 - phi, 90, -90, 180} {
			if a >= tc.lo && a <= tc.hi {
				angles = append(angles, a, math.Nextafter(a, 1000), math.Nextafter(a, -1000))
			}
		}
		for _, a := range angles {
			w, h := expandedSize(a, tc.w, tc.h)
			bw, bh = max(bw, w), max(bh, h)
			if w > mw || h > mh {
				t.Fatalf("%v: %gdeg of %dx%d expands to %dx%d, beyond MaxOutputSize %dx%d", o, a, tc.w, tc.h, w, h, mw, mh)
			}
			// Smaller inputs stay within the bound too.
			sw, sh := 1+r.IntN(tc.w), 1+r.IntN(tc.h)
			if w, h := expandedSize(a, sw, sh); w > mw || h > mh {
				t.Fatalf("%v: %gdeg of %dx%d expands to %dx%d, beyond MaxOutputSize(%d, %d) %dx%d", o, a, sw, sh, w, h, tc.w, tc.h, mw, mh)
			}
		}
		if mw > bw+2 || mh > bh+2 {
			t.Errorf("%v: MaxOutputSize(%d, %d) = %dx%d, more than 2 pixels beyond the largest seen, %dx%d", o, tc.w, tc.h, mw, mh, bw, bh)
		}
	}
	if w, h := (&RandomRotation{Degrees: [2]float64{-30, 30}}).MaxOutputSize(40, 30); w != 40 || h != 30 {
		t.Errorf("MaxOutputSize without Expand = %dx%d, want 40x30", w, h)
	}
}
