package augment

import (
	"math"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

func TestPyRound15(t *testing.T) {
	// Expected values are what CPython 3's round(x, 15) returns.
	tests := []struct {
		x, want float64
	}{
		{math.Cos(-math.Pi / 2), 0},                    // 6.123233995736766e-17
		{math.Sin(-math.Pi / 6), -0.5},                 // -0.49999999999999994
		{0.12345678901234567, 0.123456789012346},       //
		{-0.7071067811865476, -0.707106781186548},      //
		{0.7071067811865475, 0.707106781186547},        //
		{1, 1},                                         //
		{0.0000000000000025, 0.000000000000002},        // a tie on the decimal, to even
		{0.9999999999999999, 1},                        //
		{-0.3420201433256687, -0.342020143325669},      //
		{0.17364817766693041, 0.17364817766693},        //
		{-0.00000000000000049, math.Copysign(0, -1)},   //
		{0.0000000000000015, 0.000000000000001},        // just below the tie in binary
		{0.49999999999999994, 0.5},                     //
		{-math.Sin(math.Pi / 180), -0.017452406437284}, //
	}
	for _, tt := range tests {
		if got := pyRound15(tt.x); got != tt.want || math.Signbit(got) != math.Signbit(tt.want) {
			t.Errorf("pyRound15(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

func TestPyMod(t *testing.T) {
	tests := []struct{ x, want float64 }{
		{0, 0}, {90, 90}, {-90, 270}, {360, 0}, {-360, 0}, {725, 5}, {-1e-20, 360}, {-30.5, 329.5},
	}
	for _, tt := range tests {
		if got := pyMod(tt.x, 360); got != tt.want {
			t.Errorf("pyMod(%v, 360) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

// forwardAffine is the forward map torchvision documents for affine: about the centre,
// rotation R(angle) · shear along y · shear along x · scale, then translation.
func forwardAffine(center [2]float64, angle float64, translate [2]float64, scale float64, shear [2]float64) (m [2][3]float64) {
	r, sx, sy := angle*math.Pi/180, shear[0]*math.Pi/180, shear[1]*math.Pi/180
	R := [2][2]float64{{math.Cos(r), -math.Sin(r)}, {math.Sin(r), math.Cos(r)}}
	shy := [2][2]float64{{1, 0}, {-math.Tan(sy), 1}}
	shx := [2][2]float64{{1, -math.Tan(sx)}, {0, 1}}
	mul := func(a, b [2][2]float64) (c [2][2]float64) {
		for i := range 2 {
			for j := range 2 {
				c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j]
			}
		}
		return c
	}
	rss := mul(mul(R, shy), shx)
	for i := range 2 {
		for j := range 2 {
			m[i][j] = rss[i][j] * scale
		}
		// p_out = RSS (p_in - C) + C + T
		m[i][2] = center[i] + translate[i] - m[i][0]*center[0] - m[i][1]*center[1]
	}
	return m
}

func TestInverseAffineMatrix(t *testing.T) {
	tests := []struct {
		angle, scale float64
		translate    [2]float64
		shear        [2]float64
	}{
		{0, 1, [2]float64{}, [2]float64{}},
		{30, 1, [2]float64{}, [2]float64{}},
		{-45, 1.3, [2]float64{5, -7}, [2]float64{}},
		{12, 0.8, [2]float64{-3, 2}, [2]float64{20, 0}},
		{-170, 1.1, [2]float64{0, 9}, [2]float64{-15, 25}},
	}
	center := [2]float64{37.5, 20}
	for _, tt := range tests {
		inv := inverseAffineMatrix(center, tt.angle, tt.translate, tt.scale, tt.shear)
		fwd := forwardAffine(center, tt.angle, tt.translate, tt.scale, tt.shear)
		// inv ∘ fwd must be the identity.
		for _, p := range [][2]float64{{0, 0}, {10, 3}, {-5, 40}, {75, 40}} {
			x := fwd[0][0]*p[0] + fwd[0][1]*p[1] + fwd[0][2]
			y := fwd[1][0]*p[0] + fwd[1][1]*p[1] + fwd[1][2]
			bx := inv[0]*x + inv[1]*y + inv[2]
			by := inv[3]*x + inv[4]*y + inv[5]
			if math.Abs(bx-p[0]) > 1e-9 || math.Abs(by-p[1]) > 1e-9 {
				t.Errorf("%+v: inverse of forward maps %v to (%v, %v)", tt, p, bx, by)
			}
		}
	}
}

func TestRotateRightAngles(t *testing.T) {
	src := photo(t, 1, 9, 6)
	sq := photo(t, 2, 7, 7)
	at := func(m *decode.Image, x, y int) [3]uint8 {
		o := y*m.Stride + 3*x
		return [3]uint8{m.Pix[o], m.Pix[o+1], m.Pix[o+2]}
	}
	tests := []struct {
		name  string
		src   *decode.Image
		angle float64
		// want returns the source pixel of output (x, y).
		want func(x, y int) (int, int)
		w, h int
	}{
		{"0", src, 0, func(x, y int) (int, int) { return x, y }, 9, 6},
		{"360", src, 360, func(x, y int) (int, int) { return x, y }, 9, 6},
		{"180", src, 180, func(x, y int) (int, int) { return 8 - x, 5 - y }, 9, 6},
		{"-180", src, -180, func(x, y int) (int, int) { return 8 - x, 5 - y }, 9, 6},
		{"90 square", sq, 90, func(x, y int) (int, int) { return 6 - y, x }, 7, 7},
		{"270 square", sq, 270, func(x, y int) (int, int) { return y, 6 - x }, 7, 7},
		{"-90 square", sq, -90, func(x, y int) (int, int) { return y, 6 - x }, 7, 7},
	}
	for _, tt := range tests {
		for _, interp := range []Interpolation{Nearest, Bilinear} {
			t.Run(tt.name+"/"+interp.String(), func(t *testing.T) {
				c := NewContext()
				got := Rotate(c, tt.src, tt.angle, interp, [3]uint8{1, 2, 3})
				if got.Width != tt.w || got.Height != tt.h {
					t.Fatalf("size %dx%d, want %dx%d", got.Width, got.Height, tt.w, tt.h)
				}
				if got == tt.src {
					t.Fatal("Rotate returned its input")
				}
				for y := range tt.h {
					for x := range tt.w {
						sx, sy := tt.want(x, y)
						if at(got, x, y) != at(tt.src, sx, sy) {
							t.Fatalf("pixel (%d, %d) = %v, want source (%d, %d) = %v", x, y, at(got, x, y), sx, sy, at(tt.src, sx, sy))
						}
					}
				}
			})
		}
	}
}

// TestRotate90NonSquare: Pillow has no shortcut for a quarter turn of a non-square image;
// with even sides pixel centres map onto pixel centres, so both filters copy pixels and
// the corners outside the source take the fill.
func TestRotate90NonSquare(t *testing.T) {
	const w, h = 10, 6
	src := photo(t, 3, w, h)
	fill := [3]uint8{9, 8, 7}
	cx, cy := w/2, h/2
	for _, interp := range []Interpolation{Nearest, Bilinear} {
		t.Run(interp.String(), func(t *testing.T) {
			got := Rotate(NewContext(), src, 90, interp, fill)
			for y := range h {
				for x := range w {
					// The inverse map of a counter-clockwise quarter turn.
					sx, sy := cx+cy-1-y, x+cy-cx
					want := fill
					if sx >= 0 && sx < w && sy >= 0 && sy < h {
						copy(want[:], src.Pix[sy*src.Stride+3*sx:])
					}
					var px [3]uint8
					copy(px[:], got.Pix[y*got.Stride+3*x:])
					if px != want {
						t.Fatalf("pixel (%d, %d) = %v, want %v", x, y, px, want)
					}
				}
			}
		})
	}
}

func TestAffineTranslate(t *testing.T) {
	const w, h = 12, 8
	src := photo(t, 4, w, h)
	fill := [3]uint8{200, 100, 50}
	for _, tr := range [][2]float64{{3, -2}, {-5, 0}, {0, 7}, {20, 0}} {
		for _, interp := range []Interpolation{Nearest, Bilinear} {
			got := Affine(NewContext(), src, 0, tr, 1, [2]float64{}, interp, fill)
			for y := range h {
				for x := range w {
					sx, sy := x-int(tr[0]), y-int(tr[1])
					want := fill
					if sx >= 0 && sx < w && sy >= 0 && sy < h {
						copy(want[:], src.Pix[sy*src.Stride+3*sx:])
					}
					var px [3]uint8
					copy(px[:], got.Pix[y*got.Stride+3*x:])
					if px != want {
						t.Fatalf("translate %v %v: pixel (%d, %d) = %v, want %v", tr, interp, x, y, px, want)
					}
				}
			}
		}
	}
}

// refSample maps every output pixel centre of a w×h output through the inverse affine map
// computed by inverting forwardAffine, and samples src in plain floating point: nearest
// takes the pixel containing the point, bilinear blends the four pixel centres around it
// (edges clamped). It shares no code with Affine.
func refSample(src *decode.Image, angle float64, translate [2]float64, scale float64, shear [2]float64, interp Interpolation, fill [3]uint8) []float64 {
	w, h := src.Width, src.Height
	f := forwardAffine([2]float64{float64(w) / 2, float64(h) / 2}, angle, translate, scale, shear)
	det := f[0][0]*f[1][1] - f[0][1]*f[1][0]
	out := make([]float64, 3*w*h)
	px := func(x, y, c int) float64 {
		x, y = min(max(x, 0), w-1), min(max(y, 0), h-1)
		return float64(src.Pix[y*src.Stride+3*x+c])
	}
	for y := range h {
		for x := range w {
			u, v := float64(x)+0.5-f[0][2], float64(y)+0.5-f[1][2]
			sx := (f[1][1]*u - f[0][1]*v) / det
			sy := (-f[1][0]*u + f[0][0]*v) / det
			o := out[3*(y*w+x):]
			if sx < 0 || sy < 0 || sx >= float64(w) || sy >= float64(h) {
				o[0], o[1], o[2] = float64(fill[0]), float64(fill[1]), float64(fill[2])
				continue
			}
			for c := range 3 {
				if interp == Nearest {
					o[c] = px(int(sx), int(sy), c)
					continue
				}
				x0, y0 := math.Floor(sx-0.5), math.Floor(sy-0.5)
				dx, dy := sx-0.5-x0, sy-0.5-y0
				top := px(int(x0), int(y0), c)*(1-dx) + px(int(x0)+1, int(y0), c)*dx
				bot := px(int(x0), int(y0)+1, c)*(1-dx) + px(int(x0)+1, int(y0)+1, c)*dx
				o[c] = top*(1-dy) + bot*dy
			}
		}
	}
	return out
}

// TestAffineMatchesReference compares Affine with refSample. Nearest may differ where a
// sample point lies within rounding error of a pixel boundary (Pillow's nearest path steps
// in 16.16 fixed point): at most 0.5% of values. Bilinear must be the truncated reference
// value, or the integer next to it where the reference is within 1e-6 of an integer (the
// two compute the sample points with different rounding, and at a pixel centre the exact
// value is an integer).
func TestAffineMatchesReference(t *testing.T) {
	src := photo(t, 5, 61, 47)
	fill := [3]uint8{0, 128, 255}
	tests := []struct {
		angle, scale float64
		translate    [2]float64
		shear        [2]float64
	}{
		{17, 1, [2]float64{}, [2]float64{}},
		{-33.3, 1.25, [2]float64{4, -3}, [2]float64{}},
		{0, 0.7, [2]float64{}, [2]float64{}},
		{5, 1, [2]float64{}, [2]float64{25, 0}},
		{0, 1, [2]float64{-6, 2}, [2]float64{0, -20}},
		{140, 0.9, [2]float64{1, 1}, [2]float64{-10, 8}},
	}
	for _, tt := range tests {
		for _, interp := range []Interpolation{Nearest, Bilinear} {
			got := Affine(NewContext(), src, tt.angle, tt.translate, tt.scale, tt.shear, interp, fill)
			want := refSample(src, tt.angle, tt.translate, tt.scale, tt.shear, interp, fill)
			differ := 0
			for i, v := range want {
				g := float64(got.Pix[i])
				if interp == Nearest && g != v {
					differ++
				}
				if interp == Bilinear && g != math.Floor(v-1e-6) && g != math.Floor(v+1e-6) {
					t.Fatalf("%+v %v: value %d is %v, want %v truncated", tt, interp, i, g, v)
				}
			}
			if frac := float64(differ) / float64(len(want)); frac > 0.005 {
				t.Errorf("%+v %v: %.2f%% of values differ", tt, interp, 100*frac)
			}
		}
	}
}

// TestAffineRotateAgree: torchvision's affine turns clockwise and rotate counter-clockwise,
// so Affine(-θ) and Rotate(θ) sample the same points (up to Pillow's rounding of the
// cosines to 15 decimals).
func TestAffineRotateAgree(t *testing.T) {
	src := photo(t, 6, 40, 30)
	for _, angle := range []float64{10, 45, -72.5, 91} {
		for _, interp := range []Interpolation{Nearest, Bilinear} {
			a := clone(Affine(NewContext(), src, -angle, [2]float64{}, 1, [2]float64{}, interp, [3]uint8{}))
			r := Rotate(NewContext(), src, angle, interp, [3]uint8{})
			if mean, worst := pixelDiff(t, a, r); mean > 0.01 || worst > 1 && interp == Bilinear {
				t.Errorf("angle %v %v: mean difference %.3f, worst %d", angle, interp, mean, worst)
			}
		}
	}
}

func TestRotateFloatPathFarOut(t *testing.T) {
	// A translation beyond ±32768 takes Pillow's floating-point nearest path; everything
	// is fill.
	src := photo(t, 7, 8, 8)
	got := Affine(NewContext(), src, 30, [2]float64{40000, 0}, 1, [2]float64{}, Nearest, [3]uint8{5, 6, 7})
	for i := 0; i < len(got.Pix); i += 3 {
		if got.Pix[i] != 5 || got.Pix[i+1] != 6 || got.Pix[i+2] != 7 {
			t.Fatalf("value %d is %v, want the fill", i, got.Pix[i:i+3])
		}
	}
}

func TestGeometryAllocs(t *testing.T) {
	src := photo(t, 8, 64, 48)
	c := NewContext()
	for _, interp := range []Interpolation{Nearest, Bilinear} {
		Affine(c, src, 20, [2]float64{2, 3}, 1.1, [2]float64{5, 0}, interp, [3]uint8{})
		Rotate(c, src, 33, interp, [3]uint8{})
		if n := testing.AllocsPerRun(20, func() {
			Affine(c, src, 20, [2]float64{2, 3}, 1.1, [2]float64{5, 0}, interp, [3]uint8{})
			Rotate(c, src, 33, interp, [3]uint8{})
			Rotate(c, src, 180, interp, [3]uint8{})
		}); n != 0 {
			t.Errorf("%v: %v allocations per run, want 0", interp, n)
		}
	}
}
