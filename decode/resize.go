package decode

import (
	"fmt"
	"image"
	"math"
)

// Fixed-point format of the resampling kernels. Weights are Q14 and each output sample's
// weights sum to exactly 1<<14. The intermediate image between the two passes keeps 7
// fractional bits in a uint16 (at most 255<<7 = 32640, so it also fits an int16 lane), and
// the second pass's sums stay below 32640<<14 < 1<<31.
const (
	weightBits = 14
	weightOne  = 1 << weightBits
	midBits    = 7 // fractional bits of the intermediate image

	shift1 = weightBits - midBits // first pass: 8-bit input -> intermediate
	round1 = 1 << (shift1 - 1)
	shift2 = weightBits + midBits // second pass: intermediate -> 8-bit output
	round2 = 1 << (shift2 - 1)
)

// Resizer resamples packed RGB images with PIL's antialiased bilinear filter: a triangle
// whose support grows with the downscale factor, so shrinking averages every source pixel
// instead of skipping most of them (torchvision's Resize and RandomResizedCrop on PIL images
// behave the same way).
//
// It is a separable fixed-point kernel: Q14 weights, a 16-bit intermediate image, and
// whichever pass order (horizontal or vertical first) costs fewer multiplies. On amd64
// with AVX2 both passes run in assembly; elsewhere in plain Go, with identical results.
// Every output channel is within ±1 of an exact (float64) evaluation of the same filter.
// With AVX2 a 1920×1080 -> 455×256 resize takes about 1 ms on one core, 13 to 20 times
// less than imaging.Resize with imaging.Linear on two; the Go kernels take about 10 ms.
//
// With Exact set it computes Pillow's pixels instead, bit for bit (see Exact).
//
// A Resizer keeps its weight tables (for the last few shapes, so a repeated shape costs no
// setup) and its intermediate buffer between calls; after warm-up a call allocates
// nothing. It is not safe for concurrent use.
type Resizer struct {
	// Exact makes Resize compute what Pillow 9.4 computes for
	// Image.crop(r).resize((w, h), Image.BILINEAR) on an RGB image, bit for bit (torchvision's
	// Resize and RandomResizedCrop on PIL images): Pillow's 22-bit coefficients, each
	// rounded on its own, the horizontal pass first into an 8-bit intermediate, then the
	// vertical one. It is plain Go: about as fast as Pillow's C, 10 to 20 times slower
	// than the default kernels (BenchmarkResizeExact: a 1920×1080 -> 455×256 resize takes
	// about 35 ms on one core). Default false: the fast kernels, within ±1 of Pillow.
	Exact bool

	plans [4]axisPlan // small cache keyed by (length, out length, padding)
	next  int         // plan slot to overwrite on a miss
	tmp   []uint16    // intermediate image
	acc   []int32     // one row of sums for the Go vertical kernels

	py, pcb, pcr []uint8 // resampled planes of resizeYCbCr

	eplans [2]exactPlan // Exact's plans, (n, out) keyed
	enext  int
	etmp   []uint8  // Exact's 8-bit intermediate
	eacc   []uint64 // Exact's row of sums, two to a word
	up     jpegUpsampler
	win    []uint8 // rows of planes converted first, where resizeYCbCr must
}

// axisPlan holds the weights for resampling n samples to out samples along one axis.
type axisPlan struct {
	n, out, pad int     // key, with span; pad is the multiple taps is rounded up to for SIMD
	span        span    // the source interval resampled, within the n samples
	taps        int     // weights per output sample
	simd        bool    // taps is a multiple of pad, so the assembly kernels may use it
	start       []int32 // first source sample read by each output, relative to the crop
	end         []int32 // scratch of compute: each output's support's end
	w           []int16 // out*taps Q14 weights; zero beyond each output's support
	wx          []int16 // horizontal layout for the AVX2 kernel, built on demand
	w4          []int16 // the same for the one-channel kernels (planeWeights)
	shuf        []uint8 // the one-channel kernel's byte shuffles (shuffles), if shufKnown
	shufKnown   bool
	fw          []float64 // scratch: one output's exact weights

	// The cost model uses the unpadded taps and span so that the pass order, and so the
	// pixels, do not depend on the CPU.
	support int // taps before padding
	lo, hi  int // source samples with nonzero weight
}

// Resize resamples the rectangle r of src to a w×h image in dst and returns dst.
// r must lie inside src's bounds and be non-empty. dst must not share memory with src.
func (z *Resizer) Resize(dst, src *Image, r image.Rectangle, w, h int) (*Image, error) {
	if r.Empty() || r.Min.X < 0 || r.Min.Y < 0 || r.Max.X > src.Width || r.Max.Y > src.Height {
		return nil, fmt.Errorf("decode: resize: rectangle %v outside %dx%d image", r, src.Width, src.Height)
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("decode: resize: bad output size %dx%d", w, h)
	}
	if len(src.Pix) < (r.Max.Y-1)*src.Stride+3*r.Max.X {
		return nil, fmt.Errorf("decode: resize: %dx%d image with stride %d has only %d bytes",
			src.Width, src.Height, src.Stride, len(src.Pix))
	}
	if z.Exact {
		return z.resizeExact(dst, src, r, w, h), nil
	}
	sx, sy := wholeSpans(r)
	return z.resize(dst, src, r, sx, sy, w, h), nil
}

// span is an interval of source samples, [off, off+length), in coordinates relative to the
// start of the rectangle resize reads; Resize's spans are the whole rectangle. A
// fractional span is what remains of a crop after DCT scaling.
type span struct{ off, length float64 }

// wholeSpans returns the spans that cover all of r.
func wholeSpans(r image.Rectangle) (sx, sy span) {
	return span{0, float64(r.Dx())}, span{0, float64(r.Dy())}
}

// resize is Resize for the spans sx, sy inside r; filter taps never leave r.
func (z *Resizer) resize(dst, src *Image, r image.Rectangle, sx, sy span, w, h int) *Image {
	cw, ch := r.Dx(), r.Dy()
	xp, yp := z.axisPlans(cw, ch, w, h, sx, sy)
	dst.Reset(w, h)
	if verticalFirst(cw, w, h, xp, yp) {
		z.verticalFirst(dst, src, r, xp, yp)
	} else {
		z.horizontalFirst(dst, src, r, xp, yp)
	}
	return dst
}

// verticalFirst reports whether resampling packed RGB cw pixels wide to w×h with the
// plans xp, yp costs less vertical pass first. Vertical first filters every column of
// the crop for each output row; horizontal first filters the rows the vertical pass
// reads (about all of them when shrinking, fewer when enlarging a crop). The costs, in
// units of half a vertical tap on one pixel (three samples), are what the AVX2 kernels
// spend: a horizontal tap costs about 2.5 vertical ones, plus 5 for finishing each
// output pixel. For 1920×1080 -> 455×256 vertical first is twice as fast; for enlarging
// a small crop, horizontal first is.
func verticalFirst(cw, w, h int, xp, yp *axisPlan) bool {
	hcost := func(t int) int { return 5*t + 10 }
	costV := h*cw*2*yp.support + h*w*hcost(xp.support)
	costH := (yp.hi-yp.lo)*w*hcost(xp.support) + h*w*2*yp.support
	return costV <= costH
}

// verticalFirst resamples the crop's columns into a w3×outH intermediate, then its rows.
func (z *Resizer) verticalFirst(dst, src *Image, r image.Rectangle, xp, yp *axisPlan) {
	cw3 := 3 * r.Dx()
	h := dst.Height
	tmp := z.buffer(h * cw3)
	acc := z.accumulator(cw3)
	x0 := 3 * r.Min.X
	for y := 0; y < h; y++ {
		row := (r.Min.Y + int(yp.start[y])) * src.Stride
		vert8to16(tmp[y*cw3:(y+1)*cw3], src.Pix[row+x0:], src.Stride, yp.w[y*yp.taps:(y+1)*yp.taps], cw3, yp.simd, acc)
	}
	for y := 0; y < h; y++ {
		// The slack after the last row covers the AVX2 kernel's over-read.
		horiz16to8(dst.Row(y), tmp[y*cw3:], xp)
	}
}

// horizontalFirst resamples rows lo..hi-1 of the crop into an outW×(hi-lo) intermediate,
// then its columns.
func (z *Resizer) horizontalFirst(dst, src *Image, r image.Rectangle, xp, yp *axisPlan) {
	lo, hi := int(yp.start[0]), int(yp.start[yp.out-1])+yp.taps
	w3 := 3 * dst.Width
	tmp := z.buffer((hi - lo) * w3)
	acc := z.accumulator(w3)
	x0 := 3 * r.Min.X
	for y := lo; y < hi; y++ {
		row := (r.Min.Y+y)*src.Stride + x0
		horiz8to16(tmp[(y-lo)*w3:(y-lo+1)*w3], src.Pix[row:], xp)
	}
	for y := 0; y < dst.Height; y++ {
		s := (int(yp.start[y]) - lo) * w3
		vert16to8(dst.Row(y), tmp[s:], w3, yp.w[y*yp.taps:(y+1)*yp.taps], w3, yp.simd, acc)
	}
}

// buffer returns the intermediate buffer with room for n samples plus slack for the
// AVX2 horizontal kernel, which reads up to two samples past the last tap.
func (z *Resizer) buffer(n int) []uint16 {
	const slack = 16
	if cap(z.tmp) < n+slack {
		z.tmp = make([]uint16, n+slack)
	}
	z.tmp = z.tmp[:n+slack]
	return z.tmp
}

// accumulator returns scratch for n sums.
func (z *Resizer) accumulator(n int) []int32 {
	z.acc = grow(z.acc, n)
	return z.acc
}

// axisPlans returns the horizontal and vertical plans for resampling the spans sx, sy of a
// cw×ch rectangle to w×h, with taps padded as the AVX2 kernels need them when they run.
func (z *Resizer) axisPlans(cw, ch, w, h int, sx, sy span) (xp, yp *axisPlan) {
	padX, padY := 1, 1
	if useAVX2 {
		padX, padY = 4, 2
	}
	xp = z.plan(cw, w, padX, sx, nil)
	return xp, z.plan(ch, h, padY, sy, xp)
}

// plan returns the cached weights for the span sp of n samples -> out, with taps padded
// to a multiple of pad, computing them on a miss.
//
// keep is a plan the caller still uses (the other axis's): it is never the one evicted.
func (z *Resizer) plan(n, out, pad int, sp span, keep *axisPlan) *axisPlan {
	for i := range z.plans {
		p := &z.plans[i]
		if p.n == n && p.out == out && p.pad == pad && p.span == sp {
			return p
		}
	}
	p := &z.plans[z.next]
	if p == keep {
		z.next = (z.next + 1) % len(z.plans)
		p = &z.plans[z.next]
	}
	z.next = (z.next + 1) % len(z.plans)
	p.compute(n, out, pad, sp)
	return p
}

// compute fills p with PIL's antialiased bilinear weights for the span sp of n samples ->
// out (see Resample/precompute_coeffs in Pillow, whose box argument is the span),
// quantised to Q14.
//
// Quantisation rounds the running sum of each output's weights, not each weight, so every
// weight is within one unit of exact, every partial sum within half a unit, and the total
// is exactly 1<<14.
func (p *axisPlan) compute(n, out, pad int, sp span) {
	p.n, p.out, p.pad, p.span = n, out, pad, sp
	scale := sp.length / float64(out)
	fscale := max(scale, 1)
	support := fscale // the triangle filter's support is 1
	// First pass: the support of each output, to size the table. A train crop has a new
	// size every time, so this runs for every sample (2-4 plans of 224 outputs): each
	// support is computed once and kept, and rounding avoids math.Round's generality.
	p.start, p.end = grow(p.start, out), grow(p.end, out)
	taps := 1
	for i := 0; i < out; i++ {
		lo, hi := support1(i, sp.off, scale, support, n)
		p.start[i], p.end[i] = int32(lo), int32(hi)
		taps = max(taps, hi-lo)
	}
	p.support = taps
	p.lo, p.hi = int(p.start[0]), int(p.end[out-1])
	p.simd = false
	if pad > 1 {
		if t := (taps + pad - 1) / pad * pad; t <= n {
			taps, p.simd = t, true
		}
	}
	p.taps = taps
	p.w = grow(p.w, out*taps)
	clear(p.w)
	p.fw = grow(p.fw, taps)
	p.wx, p.w4, p.shufKnown = p.wx[:0], p.w4[:0], false
	for i := 0; i < out; i++ {
		center := sp.off + (float64(i)+0.5)*scale
		lo, hi := int(p.start[i]), int(p.end[i])
		// Keep the taps inside [0, n): outputs near the end start earlier, with zero
		// weights in front.
		s := min(lo, n-taps)
		p.start[i] = int32(s)
		fw := p.fw[:hi-lo]
		var total float64
		for k := range fw {
			t := float64(lo+k) - center + 0.5
			if fscale != 1 { // enlarging divides by 1, which changes nothing
				t /= fscale
			}
			t = math.Abs(t)
			fw[k] = 0
			if t < 1 {
				fw[k] = 1 - t
				total += fw[k]
			}
		}
		w := p.w[i*taps+(lo-s) : i*taps+(lo-s)+len(fw)]
		if total == 0 { // cannot happen for a valid filter; keep the output defined
			w[0] = weightOne
			continue
		}
		var sum float64
		prev := 0
		for k := range fw[:len(fw)-1] {
			sum += fw[k]
			q := roundHalfUp(sum / total * weightOne)
			w[k] = int16(q - prev)
			prev = q
		}
		w[len(fw)-1] = int16(weightOne - prev)
	}
}

// roundHalfUp is math.Round for 0 <= v < 2^31, a few times cheaper: v - float64(q) is
// exact, so the result is the same.
func roundHalfUp(v float64) int {
	q := int(v)
	if v-float64(q) >= 0.5 {
		q++
	}
	return q
}

// support1 returns the source range [lo, hi) output i reads, clamped to [0, n), exactly as
// Pillow's precompute_coeffs computes xmin and xmax.
func support1(i int, off, scale, support float64, n int) (lo, hi int) {
	center := off + (float64(i)+0.5)*scale
	lo = max(int(math.Floor(center-support+0.5)), 0)
	hi = min(int(math.Floor(center+support+0.5)), n)
	if hi <= lo { // a degenerate support; read the nearest sample
		lo = min(max(int(center), 0), n-1)
		hi = lo + 1
	}
	return lo, hi
}

// grow returns s resized to n elements, reusing its memory when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// wideWeights returns p's weights in the AVX2 horizontal kernel's layout: for every group
// of four taps, 16 int16 (w0 w1 w0 w1 w0 w1 0 0 | w2 w3 w2 w3 w2 w3 0 0), matching pixel
// pairs shuffled to (r0 r1 g0 g1 b0 b1 _ _).
func (p *axisPlan) wideWeights() []int16 {
	if len(p.wx) > 0 {
		return p.wx
	}
	groups := p.taps / 4
	p.wx = grow(p.wx, p.out*groups*16)
	for i := 0; i < p.out; i++ {
		for g := 0; g < groups; g++ {
			w := p.w[i*p.taps+4*g : i*p.taps+4*g+4]
			d := p.wx[(i*groups+g)*16 : (i*groups+g+1)*16]
			for c := 0; c < 3; c++ {
				d[2*c], d[2*c+1] = w[0], w[1]
				d[8+2*c], d[8+2*c+1] = w[2], w[3]
			}
			d[6], d[7], d[14], d[15] = 0, 0, 0, 0
		}
	}
	return p.wx
}

// vert8to16 computes one intermediate row: dst[i] = Σ_k w[k]·src[k*stride+i] for the n
// bytes of a row, rounded to the intermediate's fixed point. acc is scratch for n sums.
func vert8to16(dst []uint16, src []uint8, stride int, w []int16, n int, simd bool, acc []int32) {
	i := 0
	if simd && n >= 16 {
		i = n &^ 15
		vert8to16AVX2(&dst[0], &src[0], stride, &w[0], len(w)/2, i)
		if i < n {
			// The last 16 samples again: an output depends on its column only, and
			// one more kernel call costs less than the Go loops over the rest.
			vert8to16AVX2(&dst[n-16], &src[n-16], stride, &w[0], len(w)/2, 16)
			return
		}
	}
	if i == n {
		return
	}
	// Two rows at a time into a row of sums: simple loops the compiler keeps in
	// registers without bounds checks.
	acc = acc[:n-i]
	clear(acc)
	k := 0
	for ; k+1 < len(w); k += 2 {
		mac2(acc, src[k*stride+i:k*stride+n], src[(k+1)*stride+i:(k+1)*stride+n], int32(w[k]), int32(w[k+1]))
	}
	if k < len(w) {
		mac2(acc, src[k*stride+i:k*stride+n], src[k*stride+i:k*stride+n], int32(w[k]), 0)
	}
	d := dst[i:n]
	d = d[:len(acc)]
	for j, a := range acc {
		d[j] = uint16((a + round1) >> shift1)
	}
}

// vert16to8 computes one output row from intermediate rows stride samples apart.
func vert16to8(dst []uint8, src []uint16, stride int, w []int16, n int, simd bool, acc []int32) {
	i := 0
	if simd && n >= 16 {
		i = n &^ 15
		vert16to8AVX2(&dst[0], &src[0], 2*stride, &w[0], len(w)/2, i)
		if i < n { // the last 16 samples again, as in vert8to16
			vert16to8AVX2(&dst[n-16], &src[n-16], 2*stride, &w[0], len(w)/2, 16)
			return
		}
	}
	if i == n {
		return
	}
	acc = acc[:n-i]
	clear(acc)
	k := 0
	for ; k+1 < len(w); k += 2 {
		mac2(acc, src[k*stride+i:k*stride+n], src[(k+1)*stride+i:(k+1)*stride+n], int32(w[k]), int32(w[k+1]))
	}
	if k < len(w) {
		mac2(acc, src[k*stride+i:k*stride+n], src[k*stride+i:k*stride+n], int32(w[k]), 0)
	}
	d := dst[i:n]
	d = d[:len(acc)]
	for j, a := range acc {
		d[j] = uint8((a + round2) >> shift2)
	}
}

// mac2 adds w0*r0[j] + w1*r1[j] to every acc[j]. It is kept out of line so that the
// register allocator sees only this loop (inlined, its index is spilled every iteration).
//
//go:noinline
func mac2[T uint8 | uint16](acc []int32, r0, r1 []T, w0, w1 int32) {
	r0, r1 = r0[:len(acc)], r1[:len(acc)]
	for j := range acc {
		acc[j] += w0*int32(r0[j]) + w1*int32(r1[j])
	}
}

// horiz8to16 resamples one row of packed RGB bytes into the intermediate.
func horiz8to16(dst []uint16, src []uint8, p *axisPlan) {
	x := 0
	if p.simd {
		// The kernel reads 16 bytes per group of four taps: 4 past the last tap.
		x = p.safeOutputs(len(src)/3, 2)
		if x > 0 {
			horiz8to16AVX2(&dst[0], &src[0], &p.start[0], &p.wideWeights()[0], p.taps/4, x)
		}
	}
	taps := p.taps
	for ; x < p.out; x++ {
		s := 3 * int(p.start[x])
		sp := src[s : s+3*taps]
		w := p.w[x*taps : (x+1)*taps]
		var r, g, b int32
		for k, wk := range w {
			px := sp[3*k : 3*k+3]
			r += int32(wk) * int32(px[0])
			g += int32(wk) * int32(px[1])
			b += int32(wk) * int32(px[2])
		}
		d := dst[3*x : 3*x+3]
		d[0] = uint16((r + round1) >> shift1)
		d[1] = uint16((g + round1) >> shift1)
		d[2] = uint16((b + round1) >> shift1)
	}
}

// horiz16to8 resamples one intermediate row into a row of the output.
func horiz16to8(dst []uint8, src []uint16, p *axisPlan) {
	x := 0
	if p.simd {
		// The kernel reads two samples past the last tap; src has the slack (see buffer).
		x = p.out
		horiz16to8AVX2(&dst[0], &src[0], &p.start[0], &p.wideWeights()[0], p.taps/4, x)
	}
	taps := p.taps
	for ; x < p.out; x++ {
		s := 3 * int(p.start[x])
		sp := src[s : s+3*taps]
		w := p.w[x*taps : (x+1)*taps]
		var r, g, b int32
		for k, wk := range w {
			px := sp[3*k : 3*k+3]
			r += int32(wk) * int32(px[0])
			g += int32(wk) * int32(px[1])
			b += int32(wk) * int32(px[2])
		}
		d := dst[3*x : 3*x+3]
		d[0] = uint8((r + round2) >> shift2)
		d[1] = uint8((g + round2) >> shift2)
		d[2] = uint8((b + round2) >> shift2)
	}
}

// safeOutputs returns how many leading outputs the AVX2 horizontal kernel may compute on
// a row of avail pixels (the row and whatever follows it in memory) when it reads extra
// bytes past each output's last tap. Starts never decrease, so the safe outputs are a
// prefix.
func (p *axisPlan) safeOutputs(avail, extraPixels int) int {
	x := p.out
	for x > 0 && int(p.start[x-1])+p.taps+extraPixels > avail {
		x--
	}
	return x
}
