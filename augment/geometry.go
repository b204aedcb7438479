package augment

import (
	"fmt"
	"math"

	"github.com/conveyor-ml/conveyor/decode"
)

// Interpolation selects how the geometric ops (Affine, Rotate, RandomRotation,
// RandomAffine, RandomPerspective) sample the source between pixel centres, as
// torchvision's InterpolationMode does for PIL images.
type Interpolation int

const (
	// Nearest takes the source pixel under the sampling point (PIL's NEAREST), the
	// default of torchvision's geometric transforms.
	Nearest Interpolation = iota
	// Bilinear blends the 2×2 source pixels around the sampling point (PIL's BILINEAR
	// in Image.transform: no antialiasing, unlike Resize).
	Bilinear
)

func (i Interpolation) String() string {
	switch i {
	case Nearest:
		return "nearest"
	case Bilinear:
		return "bilinear"
	}
	return fmt.Sprintf("Interpolation(%d)", int(i))
}

// checkInterpolation reports an Interpolation other than Nearest and Bilinear.
func checkInterpolation(op string, i Interpolation) error {
	if i != Nearest && i != Bilinear {
		return paramErrorf(op, "Interpolation %d is neither Nearest nor Bilinear", int(i))
	}
	return nil
}

// degToRad is CPython's math.radians factor, the float64 π divided by 180 at run time
// (a Go constant expression would divide the exact π and may round differently).
var degToRad = func() float64 { pi := math.Pi; return pi / 180 }()

// Affine returns src transformed by a rotation of angle degrees (clockwise in image
// coordinates, y down, as torchvision), a scale, a shear of shear[0] degrees along x and
// shear[1] along y, then a translation by translate pixels, about the image centre,
// like torchvision.transforms.functional.affine on a PIL image: the output keeps src's
// size, pixels whose source falls outside src take fill, and the result is written into
// c.Next(src).
//
// It computes torchvision's inverse matrix (_get_inverse_affine_matrix with centre
// (width/2, height/2)) and samples as Pillow's Image.transform(AFFINE) does, including
// its fixed-point nearest-neighbour path, so pixels match Pillow's. scale must be
// positive and finite.
func Affine(c *Context, src *decode.Image, angle float64, translate [2]float64, scale float64, shear [2]float64, interp Interpolation, fill [3]uint8) *decode.Image {
	center := [2]float64{float64(src.Width) * 0.5, float64(src.Height) * 0.5}
	m := inverseAffineMatrix(center, angle, translate, scale, shear)
	dst := c.Next(src)
	dst.Reset(src.Width, src.Height)
	transformAffine(dst, src, m, interp, fill)
	return dst
}

// Rotate returns src rotated by angle degrees counter-clockwise about its centre, like
// torchvision.transforms.functional.rotate on a PIL image with expand=False (Pillow's
// Image.rotate): the output keeps src's size, corners take fill, and the result is
// written into c.Next(src). Multiples of 180 degrees, and of 90 for a square image, are
// exact pixel moves, as in Pillow.
func Rotate(c *Context, src *decode.Image, angle float64, interp Interpolation, fill [3]uint8) *decode.Image {
	return rotate(c, src, angle, false, interp, fill)
}

// rotate is Pillow's Image.rotate without centre or translation: with expand the output
// grows to hold the whole rotated image.
func rotate(c *Context, src *decode.Image, angle float64, expand bool, interp Interpolation, fill [3]uint8) *decode.Image {
	angle = pyMod(angle, 360)
	w, h := src.Width, src.Height
	dst := c.Next(src)
	switch {
	case angle == 0:
		dst.Reset(w, h)
		for y := range h {
			copy(dst.Row(y), src.Row(y))
		}
		return dst
	case angle == 180:
		transpose(dst, src, 180)
		return dst
	case (angle == 90 || angle == 270) && (expand || w == h):
		transpose(dst, src, int(angle))
		return dst
	}
	m, w, h := rotateMatrix(angle, w, h, expand)
	dst.Reset(w, h)
	transformAffine(dst, src, m, interp, fill)
	return dst
}

// rotateMatrix is the output-to-input map of Pillow's rotate(angle) of a w×h image, angle
// already reduced to [0, 360), and with expand the size of the output.
func rotateMatrix(angle float64, w, h int, expand bool) (m [6]float64, nw, nh int) {
	a := -float64(angle * degToRad)
	cs, sn := pyRound15(math.Cos(a)), pyRound15(math.Sin(a))
	m = [6]float64{cs, sn, 0, pyRound15(-math.Sin(a)), cs, 0}
	cx, cy := float64(w)/2, float64(h)/2
	m[2], m[5] = affinePoint(m, -cx, -cy)
	m[2] += cx
	m[5] += cy
	if !expand {
		return m, w, h
	}
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, p := range [4][2]float64{{0, 0}, {float64(w), 0}, {float64(w), float64(h)}, {0, float64(h)}} {
		x, y := affinePoint(m, p[0], p[1])
		minX, maxX = math.Min(minX, x), math.Max(maxX, x)
		minY, maxY = math.Min(minY, y), math.Max(maxY, y)
	}
	nw = int(math.Ceil(maxX)) - int(math.Floor(minX))
	nh = int(math.Ceil(maxY)) - int(math.Floor(minY))
	m[2], m[5] = affinePoint(m, -float64(nw-w)/2.0, -float64(nh-h)/2.0)
	return m, nw, nh
}

// affinePoint applies Pillow's rotate helper transform(x, y, matrix).
func affinePoint(m [6]float64, x, y float64) (float64, float64) {
	return float64(m[0]*x) + float64(m[1]*y) + m[2], float64(m[3]*x) + float64(m[4]*y) + m[5]
}

// inverseAffineMatrix is torchvision's _get_inverse_affine_matrix (inverted=True): the
// map from output to input coordinates of rotation, scale and shear about center, then
// translation. Each product is rounded on its own (the float64 conversions forbid fused
// multiply-adds) so the coefficients are Python's.
func inverseAffineMatrix(center [2]float64, angle float64, translate [2]float64, scale float64, shear [2]float64) [6]float64 {
	rot := float64(angle * degToRad)
	sx := float64(shear[0] * degToRad)
	sy := float64(shear[1] * degToRad)
	cx, cy := center[0], center[1]
	tx, ty := translate[0], translate[1]

	a := math.Cos(rot-sy) / math.Cos(sy)
	b := float64(float64(-math.Cos(rot-sy)*math.Tan(sx))/math.Cos(sy)) - math.Sin(rot)
	cc := math.Sin(rot-sy) / math.Cos(sy)
	d := float64(float64(-math.Sin(rot-sy)*math.Tan(sx))/math.Cos(sy)) + math.Cos(rot)

	m := [6]float64{d, -b, 0, -cc, a, 0}
	for i := range m {
		m[i] /= scale
	}
	m[2] += float64(m[0]*(-cx-tx)) + float64(m[1]*(-cy-ty))
	m[5] += float64(m[3]*(-cx-tx)) + float64(m[4]*(-cy-ty))
	m[2] += cx
	m[5] += cy
	return m
}

// pyMod is Python's float x % y for y > 0: the result has y's sign.
func pyMod(x, y float64) float64 {
	m := math.Mod(x, y)
	if m != 0 {
		if (y < 0) != (m < 0) {
			m += y
		}
	} else {
		m = math.Copysign(0, y)
	}
	return m
}

// pyRound15 is Python's round(x, 15) for |x| ≤ 1: the float64 nearest to x rounded to 15
// decimals, ties to even. Pillow's rotate rounds its cosines with it, which turns cos(90°)
// into an exact 0. The product x·10¹⁵ is exact up to its rounding error e, recovered
// with a fused multiply-add, so the decimal rounding is decided on the exact value.
func pyRound15(x float64) float64 {
	const s = 1e15
	p := x * s
	e := math.FMA(x, s, -p) // x·s = p + e exactly
	n := math.Floor(p)
	d := (p - n - 0.5) + e // sign of the exact fraction minus one half
	if d > 0 || (d == 0 && math.Mod(n, 2) != 0) {
		n++
	}
	if n == 0 {
		return math.Copysign(0, x) // Python keeps the sign of a rounded-away value
	}
	return n / s
}

// transpose writes src rotated by a multiple of 90 degrees counter-clockwise into dst,
// as Pillow's Image.transpose(ROTATE_90/180/270).
func transpose(dst, src *decode.Image, angle int) {
	w, h := src.Width, src.Height
	switch angle {
	case 180:
		dst.Reset(w, h)
		for y := range h {
			s, d := src.Row(h-1-y), dst.Row(y)
			for x := range w {
				copy(d[3*x:3*x+3], s[3*(w-1-x):3*(w-1-x)+3])
			}
		}
	case 90: // out(x, y) = in(w-1-y, x)
		dst.Reset(h, w)
		for y := range w {
			d := dst.Row(y)
			sx := 3 * (w - 1 - y)
			for x := range h {
				copy(d[3*x:3*x+3], src.Pix[x*src.Stride+sx:x*src.Stride+sx+3])
			}
		}
	case 270: // out(x, y) = in(y, h-1-x)
		dst.Reset(h, w)
		for y := range w {
			d := dst.Row(y)
			for x := range h {
				o := (h-1-x)*src.Stride + 3*y
				copy(d[3*x:3*x+3], src.Pix[o:o+3])
			}
		}
	}
}

// coord is Pillow's COORD: truncation, with any negative coordinate mapped to -1.
func coord(v float64) int {
	if v < 0 {
		return -1
	}
	return int(v)
}

// floorC is Pillow's FLOOR macro.
func floorC(v float64) int {
	if v < 0 {
		return int(math.Floor(v))
	}
	return int(v)
}

// fillImage sets every pixel of dst to fill.
func fillImage(dst *decode.Image, fill [3]uint8) {
	for y := range dst.Height {
		fillRow(dst.Row(y), fill)
	}
}

func fillRow(row []uint8, fill [3]uint8) {
	if fill == [3]uint8{} {
		clear(row)
		return
	}
	for i := 0; i+2 < len(row); i += 3 {
		row[i], row[i+1], row[i+2] = fill[0], fill[1], fill[2]
	}
}

// transformAffine fills dst (already sized) from src through the output-to-input affine
// map m, as Pillow's ImagingTransformAffine: bilinear through the generic per-pixel
// engine; nearest through the scaling shortcut when m has no rotation, else 16.16 fixed
// point when all four corners map within ±32768, else floating point.
func transformAffine(dst, src *decode.Image, m [6]float64, interp Interpolation, fill [3]uint8) {
	fillImage(dst, fill)
	if interp != Nearest {
		genericTransform(dst, src, m[:], false, interp)
		return
	}
	if m[1] == 0 && m[3] == 0 {
		scaleAffine(dst, src, m)
		return
	}
	x1, y1 := float64(dst.Width), float64(dst.Height)
	if checkFixed(m, 0, 0) && checkFixed(m, x1, y1) && checkFixed(m, 0, y1) && checkFixed(m, x1, 0) {
		affineFixed(dst, src, m)
		return
	}
	sw, sh := src.Width, src.Height
	xo := m[2] + float64(m[1]*0.5) + float64(m[0]*0.5)
	yo := m[5] + float64(m[4]*0.5) + float64(m[3]*0.5)
	for y := range dst.Height {
		out := dst.Row(y)
		xx, yy := xo, yo
		for x := range dst.Width {
			if xin := coord(xx); xin >= 0 && xin < sw {
				if yin := coord(yy); yin >= 0 && yin < sh {
					o := yin*src.Stride + 3*xin
					copy(out[3*x:3*x+3], src.Pix[o:o+3])
				}
			}
			xx += m[0]
			yy += m[3]
		}
		xo += m[1]
		yo += m[4]
	}
}

func checkFixed(m [6]float64, x, y float64) bool {
	return math.Abs(float64(x*m[0])+float64(y*m[1])+m[2]) < 32768 &&
		math.Abs(float64(x*m[3])+float64(y*m[4])+m[5]) < 32768
}

// affineFixed is Pillow's affine_fixed: nearest neighbour stepping in 16.16 fixed point,
// whose rounding of the steps decides which pixel a knife-edge sample takes.
func affineFixed(dst, src *decode.Image, m [6]float64) {
	fix := func(v float64) int32 { return int32(floorC(float64(v*65536.0) + 0.5)) }
	a0, a1, a3, a4 := fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4])
	a2 := fix(m[2] + float64(m[0]*0.5) + float64(m[1]*0.5))
	a5 := fix(m[5] + float64(m[3]*0.5) + float64(m[4]*0.5))
	sw, sh := int32(src.Width), int32(src.Height)
	for y := range dst.Height {
		out := dst.Row(y)
		xx, yy := a2, a5
		for x := range dst.Width {
			if xin := xx >> 16; xin >= 0 && xin < sw {
				if yin := yy >> 16; yin >= 0 && yin < sh {
					o := int(yin)*src.Stride + 3*int(xin)
					copy(out[3*x:3*x+3], src.Pix[o:o+3])
				}
			}
			xx += a0
			yy += a3
		}
		a2 += a1
		a5 += a4
	}
}

// scaleAffine is Pillow's ImagingScaleAffine, nearest neighbour for a map without
// rotation or shear. Its column table is recomputed per row instead of allocated.
func scaleAffine(dst, src *decode.Image, m [6]float64) {
	sw, sh := src.Width, src.Height
	yo := m[5] + float64(m[4]*0.5)
	for y := range dst.Height {
		yi := coord(yo)
		yo += m[4]
		if yi < 0 || yi >= sh {
			continue
		}
		out, in := dst.Row(y), src.Row(yi)
		xo := m[2] + float64(m[0]*0.5)
		for x := range dst.Width {
			if xin := coord(xo); xin >= 0 && xin < sw {
				copy(out[3*x:3*x+3], in[3*xin:3*xin+3])
			}
			xo += m[0]
		}
	}
}

// genericTransform is Pillow's ImagingGenericTransform for an RGB image: every output
// pixel centre (x+0.5, y+0.5) is mapped through the affine (6 coefficients) or
// perspective (8) map and sampled; samples outside src leave dst's fill.
func genericTransform(dst, src *decode.Image, m []float64, perspective bool, interp Interpolation) {
	for y := range dst.Height {
		out := dst.Row(y)
		yin := float64(y) + 0.5
		for x := range dst.Width {
			xin := float64(x) + 0.5
			var xs, ys float64
			if perspective {
				den := float64(m[6]*xin) + float64(m[7]*yin) + 1
				xs = (float64(m[0]*xin) + float64(m[1]*yin) + m[2]) / den
				ys = (float64(m[3]*xin) + float64(m[4]*yin) + m[5]) / den
			} else {
				xs = float64(m[0]*xin) + float64(m[1]*yin) + m[2]
				ys = float64(m[3]*xin) + float64(m[4]*yin) + m[5]
			}
			px := out[3*x : 3*x+3 : 3*x+3]
			if interp == Nearest {
				nearest(px, src, xs, ys)
			} else {
				bilinear(px, src, xs, ys)
			}
		}
	}
}

// nearest is Pillow's nearest_filter32.
func nearest(out []uint8, src *decode.Image, xs, ys float64) {
	x, y := coord(xs), coord(ys)
	if x < 0 || x >= src.Width || y < 0 || y >= src.Height {
		return
	}
	o := y*src.Stride + 3*x
	copy(out, src.Pix[o:o+3])
}

// bilinear is Pillow's bilinear_filter32RGB: a sample point inside the image blends its
// 2×2 neighbourhood of pixel centres, edges clamped, and truncates to 8 bits.
func bilinear(out []uint8, src *decode.Image, xin, yin float64) {
	w, h := src.Width, src.Height
	if xin < 0 || xin >= float64(w) || yin < 0 || yin >= float64(h) {
		return
	}
	xin -= 0.5
	yin -= 0.5
	x, y := floorC(xin), floorC(yin)
	dx, dy := xin-float64(x), yin-float64(y)
	in := src.Row(min(max(y, 0), h-1))
	x0, x1 := 3*min(max(x, 0), w-1), 3*min(max(x+1, 0), w-1)
	var in2 []uint8
	if y+1 >= 0 && y+1 < h {
		in2 = src.Row(y + 1)
	}
	for b := range 3 {
		v1 := float64(in[x0+b]) + float64(float64(int(in[x1+b])-int(in[x0+b]))*dx)
		v2 := v1
		if in2 != nil {
			v2 = float64(in2[x0+b]) + float64(float64(int(in2[x1+b])-int(in2[x0+b]))*dx)
		}
		v1 += float64((v2 - v1) * dy)
		out[b] = uint8(v1)
	}
}
