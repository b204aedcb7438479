package synth

import (
	"image"
	"math"
)

// Stream tags keep the random streams for different purposes independent.
const (
	streamClass = iota + 1
	streamImage
	streamNoise
	streamSize
	streamGrain
)

// rng is SplitMix64: tiny, fast and fully specified, so generated images do
// not change with the Go release (math/rand promises no stable streams).
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// between returns a uniform value in [lo, hi).
func (r *rng) between(lo, hi float64) float64 { return lo + (hi-lo)*r.float() }

// intn returns a value in [0, n) for n > 0; the modulo bias is irrelevant here.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// newRNG derives a stream from a stream tag and up to three keys.
func newRNG(tag int, seed uint64, a, b int) rng {
	r := rng{s: 0x6a09e667f3bcc909 ^ uint64(tag)}
	for _, k := range [...]uint64{seed, uint64(a), uint64(b)} {
		r.s ^= k
		r.s = r.next()
	}
	return r
}

// style is what a class shares across all its images.
type style struct {
	hue, sat, val, angle float64
}

// classStyle spreads class hues and gradient directions by the golden ratio
// and golden angle, so that neighbouring classes differ as much as possible
// and a linear model on downscaled pixels can separate them.
func classStyle(seed uint64, class int) style {
	r := newRNG(streamClass, seed, 0, 0)
	hue0, angle0 := r.float(), r.between(0, 2*math.Pi)
	c := float64(class)
	return style{
		hue:   frac(hue0 + c*0.6180339887),
		sat:   0.45 + 0.4*frac(c*0.7548776662+0.5),
		val:   0.65 + 0.3*frac(c*0.5698402910+0.25),
		angle: angle0 + c*2.3999632297,
	}
}

// Generate returns a width x height photo-like image, fully determined by
// (seed, class, index). The scene is laid out in relative coordinates, so
// the same arguments at another size of the same aspect ratio give the same
// picture rescaled (except for the per-pixel grain and noise). The image is opaque. It costs about
// 5 ms for 500x375 on one (slow, shared) core, and allocates little beyond
// the image. Generate panics if width or height is not positive.
func Generate(seed uint64, class, index, width, height int) *image.NRGBA {
	if width <= 0 || height <= 0 {
		panic("synth: Generate needs a positive width and height")
	}
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	st := classStyle(seed, class)
	r := newRNG(streamImage, seed, class, index)
	w, h := float64(width), float64(height)

	// Background: a gradient between a light and a dark shade of the class
	// hue along the class direction.
	hue := st.hue + r.between(-0.025, 0.025)
	angle := st.angle + r.between(-0.35, 0.35)
	bright := r.between(-0.06, 0.06)
	light := hsv(hue, st.sat, st.val+bright)
	dark := hsv(hue+0.07, math.Min(1, st.sat+0.2), st.val*0.45+bright)
	spread := r.between(0.9, 1.4)
	// Grain is noise painted before the blur, so it is spatially
	// correlated like fine photographic texture (foliage, fabric); each
	// shape gets its own amount, from smooth to rough. Its stream is
	// separate so that the scene's parameters do not depend on the size.
	grain := newRNG(streamGrain, seed, class, index)
	paintGradient(img, light, dark, spread*math.Cos(angle), spread*math.Sin(angle), int(r.between(8, 48)), &grain)

	// Shapes: a few large ones, some in the class's accent colours and some
	// random, then clutter: many small ones, mostly in shades of the class
	// hue, for the edge detail real photos have.
	size := math.Min(w, h)
	for n := 3 + r.intn(6); n > 0; n-- {
		var col [3]int
		switch r.intn(3) {
		case 0:
			col = hsv(hue+0.5+r.between(-0.08, 0.08), r.between(0.4, 0.9), r.between(0.3, 0.95))
		case 1:
			col = hsv(hue+r.between(-0.04, 0.04), r.between(0.2, 1), r.between(0.1, 1))
		default:
			col = hsv(r.float(), r.between(0, 1), r.between(0.1, 1))
		}
		pt := paint{col: col, alpha: int(256 * r.between(0.55, 1)), grain: int(r.between(0, 72)), rng: &grain}
		drawShape(img, &r, &pt, r.float()*w, r.float()*h, size*r.between(0.05, 0.25))
	}
	for n := 10 + r.intn(40); n > 0; n-- {
		col := hsv(hue+r.between(-0.06, 0.06), r.between(0, 1), r.between(0.05, 1))
		if r.intn(4) == 0 {
			col = hsv(r.float(), r.between(0, 1), r.between(0.1, 1))
		}
		pt := paint{col: col, alpha: int(256 * r.between(0.5, 1)), grain: int(r.between(0, 40)), rng: &grain}
		drawShape(img, &r, &pt, r.float()*w, r.float()*h, size*r.between(0.008, 0.05))
	}

	// Soften the hard shape edges a little, as a lens would.
	blur121(img)

	// Lighting and texture: a vignette, a sinusoidal grating, value noise.
	var tex texture
	tex.vignette = r.between(0.1, 0.45)
	tex.sinAmp = r.between(3, 10)
	tex.sinPeriod = size * r.between(0.03, 0.15)
	tex.sinAngle = r.between(0, 2*math.Pi)
	tex.sinPhase = r.between(0, 2*math.Pi)
	tex.cells = 4 + r.intn(11)
	for i := range tex.grid {
		tex.grid[i] = float32(r.between(-1, 1))
	}
	tex.gridAmp = float32(r.between(4, 14))
	tex.noiseAmp = 5 + r.intn(11)
	noise := newRNG(streamNoise, seed, class, index)
	tex.apply(img, &noise)
	return img
}

// drawShape draws a random ellipse, rectangle, polygon or line of size about
// s centred near (cx, cy).
func drawShape(img *image.NRGBA, r *rng, pt *paint, cx, cy, s float64) {
	rot := r.between(0, math.Pi)
	switch r.intn(4) {
	case 0:
		fillEllipse(img, cx, cy, s*r.between(0.5, 1.5), s*r.between(0.4, 1.2), rot, pt)
	case 1:
		a, b := s*r.between(0.5, 1.6), s*r.between(0.3, 1.0)
		fillPolygon(img, box(cx, cy, a, b, rot), pt)
	case 2:
		var pts [8]point
		nv := 3 + r.intn(6)
		for i := range nv {
			t := rot + 2*math.Pi*(float64(i)+r.between(-0.3, 0.3))/float64(nv)
			rad := s * r.between(0.5, 1.3)
			pts[i] = point{cx + rad*math.Cos(t), cy + rad*math.Sin(t)}
		}
		fillPolygon(img, pts[:nv], pt)
	default:
		length := s * r.between(1.5, 4)
		thick := math.Max(1, s*r.between(0.03, 0.15))
		fillPolygon(img, box(cx, cy, length/2, thick/2, rot), pt)
	}
}

type point struct{ x, y float64 }

// box returns the corners of a rectangle with half-sides a and b centred on
// (cx, cy) and rotated by rot.
func box(cx, cy, a, b, rot float64) []point {
	c, s := math.Cos(rot), math.Sin(rot)
	return []point{
		{cx + a*c - b*s, cy + a*s + b*c},
		{cx - a*c - b*s, cy - a*s + b*c},
		{cx - a*c + b*s, cy - a*s - b*c},
		{cx + a*c + b*s, cy + a*s - b*c},
	}
}

// grainAt returns triangular noise in (-amp, amp) from one random value.
func grainAt(z uint64, amp int) int { return (int(z&0xff) + int(z>>8&0xff) - 255) * amp >> 8 }

func paintGradient(img *image.NRGBA, c0, c1 [3]int, dx, dy float64, grain int, gr *rng) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	tx := make([]int, w)
	for x := range tx {
		tx[x] = int(256 * dx * ((float64(x)+0.5)/float64(w) - 0.5))
	}
	for y := range h {
		ty := int(256 * (0.5 + dy*((float64(y)+0.5)/float64(h)-0.5)))
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		var z uint64
		for x, t := range tx {
			if x&3 == 0 {
				z = gr.next() // four grain values per call
			}
			g := grainAt(z, grain)
			z >>= 16
			t = min(max(t+ty, 0), 256)
			p := row[4*x : 4*x+4 : 4*x+4]
			p[0] = clamp8(c0[0] + (c1[0]-c0[0])*t>>8 + g)
			p[1] = clamp8(c0[1] + (c1[1]-c0[1])*t>>8 + g)
			p[2] = clamp8(c0[2] + (c1[2]-c0[2])*t>>8 + g)
			p[3] = 0xff
		}
	}
}

// paint is how a shape is filled: a colour blended with weight alpha/256,
// plus luminance grain of amplitude grain.
type paint struct {
	col          [3]int
	alpha, grain int
	rng          *rng
}

// blendSpan fills pixels [x0, x1) of row y.
func blendSpan(img *image.NRGBA, y, x0, x1 int, pt *paint) {
	x0, x1 = max(x0, 0), min(x1, img.Rect.Dx())
	if x0 >= x1 {
		return
	}
	row := img.Pix[y*img.Stride+4*x0 : y*img.Stride+4*x1]
	col, alpha := pt.col, pt.alpha
	var z uint64
	for i := 0; i+3 < len(row); i += 4 {
		if i&15 == 0 {
			z = pt.rng.next() // four grain values per call
		}
		g := grainAt(z, pt.grain)
		z >>= 16
		p := row[i : i+3 : i+3]
		p[0] = clamp8(int(p[0]) + (col[0]-int(p[0]))*alpha>>8 + g)
		p[1] = clamp8(int(p[1]) + (col[1]-int(p[1]))*alpha>>8 + g)
		p[2] = clamp8(int(p[2]) + (col[2]-int(p[2]))*alpha>>8 + g)
	}
}

// fillEllipse fills the ellipse with radii rx, ry rotated by rot, sampling at
// pixel centres.
func fillEllipse(img *image.NRGBA, cx, cy, rx, ry, rot float64, pt *paint) {
	c, s := math.Cos(rot), math.Sin(rot)
	// Points (cx+dx, cy+dy) inside satisfy A dx^2 + B dx + C <= 0.
	ia, ib := 1/(rx*rx), 1/(ry*ry)
	a := c*c*ia + s*s*ib
	rmax := math.Max(rx, ry)
	y0 := max(int(math.Floor(cy-rmax)), 0)
	y1 := min(int(math.Ceil(cy+rmax)), img.Rect.Dy())
	for y := y0; y < y1; y++ {
		dy := float64(y) + 0.5 - cy
		b := 2 * dy * c * s * (ia - ib)
		cc := dy*dy*(s*s*ia+c*c*ib) - 1
		disc := b*b - 4*a*cc
		if disc < 0 {
			continue
		}
		sq := math.Sqrt(disc)
		xl := cx + (-b-sq)/(2*a)
		xr := cx + (-b+sq)/(2*a)
		blendSpan(img, y, int(math.Ceil(xl-0.5)), int(math.Floor(xr-0.5))+1, pt)
	}
}

// fillPolygon fills a polygon of at most 8 vertices with the even-odd rule,
// sampling at pixel centres.
func fillPolygon(img *image.NRGBA, pts []point, pt *paint) {
	ymin, ymax := pts[0].y, pts[0].y
	for _, p := range pts[1:] {
		ymin, ymax = math.Min(ymin, p.y), math.Max(ymax, p.y)
	}
	y0 := max(int(math.Floor(ymin)), 0)
	y1 := min(int(math.Ceil(ymax)), img.Rect.Dy())
	var xs [8]float64
	for y := y0; y < y1; y++ {
		yc := float64(y) + 0.5
		n := 0
		for i, p := range pts {
			q := pts[(i+1)%len(pts)]
			if (p.y <= yc) != (q.y <= yc) {
				x := p.x + (yc-p.y)*(q.x-p.x)/(q.y-p.y)
				// Insertion sort: there are at most 8 crossings.
				j := n
				for ; j > 0 && xs[j-1] > x; j-- {
					xs[j] = xs[j-1]
				}
				xs[j] = x
				n++
			}
		}
		for i := 0; i+1 < n; i += 2 {
			blendSpan(img, y, int(math.Ceil(xs[i]-0.5)), int(math.Ceil(xs[i+1]-0.5)), pt)
		}
	}
}

// blur121 applies the separable [1 2 1]/4 filter to RGB in place,
// replicating edges. It keeps three rows of horizontal sums, so it needs no
// full-size scratch image.
func blur121(img *image.NRGBA) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	var rows [3][]uint16
	for i := range rows {
		rows[i] = make([]uint16, 3*w)
	}
	hsum := func(y int, dst []uint16) {
		src := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			l, r := 4*max(x-1, 0), 4*min(x+1, w-1)
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0] = uint16(src[l]) + 2*uint16(src[4*x]) + uint16(src[r])
			d[1] = uint16(src[l+1]) + 2*uint16(src[4*x+1]) + uint16(src[r+1])
			d[2] = uint16(src[l+2]) + 2*uint16(src[4*x+2]) + uint16(src[r+2])
		}
	}
	prev, cur, next := rows[0], rows[1], rows[2]
	hsum(0, cur)
	copy(prev, cur)
	for y := range h {
		if y+1 < h {
			hsum(y+1, next)
		} else {
			copy(next, cur)
		}
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			p := row[4*x : 4*x+3 : 4*x+3]
			i := 3 * x
			p[0] = uint8((prev[i] + 2*cur[i] + next[i] + 8) >> 4)
			p[1] = uint8((prev[i+1] + 2*cur[i+1] + next[i+1] + 8) >> 4)
			p[2] = uint8((prev[i+2] + 2*cur[i+2] + next[i+2] + 8) >> 4)
		}
		prev, cur, next = cur, next, prev
	}
}

// texture is the lighting and texture pass applied after the shapes.
type texture struct {
	vignette                              float64
	sinAmp, sinPeriod, sinAngle, sinPhase float64
	cells                                 int // value-noise cells across each axis, at most 15
	grid                                  [16 * 16]float32
	gridAmp                               float32
	noiseAmp                              int
}

func (t *texture) apply(img *image.NRGBA, noise *rng) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	// Every per-pixel term is separable or interpolated from per-row and
	// per-column tables, so the inner loop has no trigonometry.
	k := 2 * math.Pi / t.sinPeriod
	kx, ky := k*math.Cos(t.sinAngle), k*math.Sin(t.sinAngle)
	sx, cx := make([]float32, w), make([]float32, w)
	vx := make([]int, w)
	gj, gf := make([]int, w), make([]float32, w)
	for x := range w {
		a := kx*float64(x) + t.sinPhase
		sx[x], cx[x] = float32(t.sinAmp*math.Sin(a)), float32(t.sinAmp*math.Cos(a))
		d := 2*(float64(x)+0.5)/float64(w) - 1
		vx[x] = int(128 * t.vignette * d * d)
		u := (float64(x) + 0.5) / float64(w) * float64(t.cells)
		j := int(u)
		gj[x], gf[x] = j, float32(smooth(u-float64(j)))
	}
	const stride = 16
	var grow [stride]float32
	amp := t.noiseAmp
	for y := range h {
		sy, cy := float32(math.Sin(ky*float64(y))), float32(math.Cos(ky*float64(y)))
		d := 2*(float64(y)+0.5)/float64(h) - 1
		vy := 256 - int(128*t.vignette*d*d)
		v := (float64(y) + 0.5) / float64(h) * float64(t.cells)
		i := int(v)
		f := float32(smooth(v - float64(i)))
		for j := 0; j <= t.cells; j++ {
			a, b := t.grid[i*stride+j], t.grid[(i+1)*stride+j]
			grow[j] = t.gridAmp * (a + (b-a)*f)
		}
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			j := gj[x]
			add := sx[x]*cy + cx[x]*sy + grow[j] + (grow[j+1]-grow[j])*gf[x]
			z := noise.next()
			lum := int(add) + grainAt(z, amp)
			m := vy - vx[x]
			p := row[4*x : 4*x+3 : 4*x+3]
			p[0] = clamp8(int(p[0])*m>>8 + lum + (int(z>>16&0xff)-128)*amp>>9)
			p[1] = clamp8(int(p[1])*m>>8 + lum + (int(z>>24&0xff)-128)*amp>>9)
			p[2] = clamp8(int(p[2])*m>>8 + lum + (int(z>>32&0xff)-128)*amp>>9)
		}
	}
}

func smooth(f float64) float64 { return f * f * (3 - 2*f) }

func frac(f float64) float64 { return f - math.Floor(f) }

func clamp8(v int) uint8 {
	if uint(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return uint8(v)
}

// hsv converts hue (any real, wrapped), saturation and value in [0, 1] to
// 8-bit RGB.
func hsv(h, s, v float64) [3]int {
	s, v = math.Min(math.Max(s, 0), 1), math.Min(math.Max(v, 0), 1)
	h = frac(h) * 6
	i := int(h)
	f := h - float64(i)
	p, q, t := v*(1-s), v*(1-s*f), v*(1-s*(1-f))
	var r, g, b float64
	switch i {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return [3]int{int(r*255 + 0.5), int(g*255 + 0.5), int(b*255 + 0.5)}
}
