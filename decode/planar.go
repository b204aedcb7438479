package decode

import (
	"encoding/binary"
	"image"
	"math"
)

// Planar resampling: a decoder that produces YCbCr planes (the JPEG paths) has each
// plane resampled at its own resolution, luma from the crop and chroma from the same
// region of its subsampled plane, and converts to RGB once, at the output size. That
// resamples 1.5 samples per source pixel of a 4:2:0 image instead of 3 and converts only
// the output's pixels. It is not what a decoder followed by a resize computes (chroma
// upsampled by libjpeg's triangle filter, every pixel converted and clamped, then
// resampled), but within 45 dB of it on real photos (bench/fidelity.sh), except where
// many colours leave the RGB cube: those planes are converted first (gamutExcess).

// resizePlane resamples the spans sx, sy of the rectangle r of a one-channel plane (rows
// stride bytes apart) to a w×h plane in dst, rows w bytes apart.
func (z *Resizer) resizePlane(dst, src []uint8, stride int, r image.Rectangle, sx, sy span, w, h int) {
	cw, ch := r.Dx(), r.Dy()
	xp, yp := z.axisPlans(cw, ch, w, h, sx, sy)
	// The AVX2 vertical kernels work on 16 samples of a row at once, the horizontal ones
	// on four outputs: a horizontal tap costs about three vertical ones. As in resize, the
	// model uses unpadded taps and no CPU feature, so the pass order, and so the pixels,
	// are the same on every machine.
	const hc = 3
	costV := h*cw*yp.support + hc*h*w*xp.support
	costH := hc*(yp.hi-yp.lo)*w*xp.support + h*w*yp.support
	acc := z.accumulator(max(cw, w))
	if costV <= costH {
		tmp := z.buffer(h * cw)
		for y := 0; y < h; y++ {
			row := (r.Min.Y+int(yp.start[y]))*stride + r.Min.X
			vert8to16(tmp[y*cw:(y+1)*cw], src[row:], stride, yp.w[y*yp.taps:(y+1)*yp.taps], cw, yp.simd, acc)
		}
		for y := 0; y < h; y++ {
			horiz16to8x1(dst[y*w:(y+1)*w], tmp[y*cw:(y+1)*cw], xp)
		}
		return
	}
	lo, hi := int(yp.start[0]), int(yp.start[yp.out-1])+yp.taps
	tmp := z.buffer((hi - lo) * w)
	for y := lo; y < hi; y++ {
		row := (r.Min.Y+y)*stride + r.Min.X
		horiz8to16x1(tmp[(y-lo)*w:(y-lo+1)*w], src[row:], xp)
	}
	for y := 0; y < h; y++ {
		s := (int(yp.start[y]) - lo) * w
		vert16to8(dst[y*w:(y+1)*w], tmp[s:], w, yp.w[y*yp.taps:(y+1)*yp.taps], w, yp.simd, acc)
	}
}

// planeWeights returns p's weights in the layout of the one-channel AVX2 kernels: for
// each group of four outputs and each group of four taps, the four outputs' four weights.
func (p *axisPlan) planeWeights() []int16 {
	groups, quads := p.taps/4, p.out/4
	if groups == 1 { // four taps: the layout is w's own
		return p.w[:16*quads]
	}
	if len(p.w4) > 0 {
		return p.w4
	}
	p.w4 = grow(p.w4, quads*groups*16)
	for q := 0; q < quads; q++ {
		for g := 0; g < groups; g++ {
			for j := 0; j < 4; j++ {
				o := ((q*groups+g)*4 + j) * 4
				d, s := p.w4[o:o+4:o+4], p.w[(4*q+j)*p.taps+4*g:][:4]
				d[0], d[1], d[2], d[3] = s[0], s[1], s[2], s[3]
			}
		}
	}
	return p.w4
}

// shuffles returns, for horiz8to16x1ShufAVX2, each quad's byte shuffle that gathers its
// four outputs' four taps (of each group) from the 16 bytes at the quad's first start,
// or nil if some quad's taps spread wider than that (a shrink by more than about 3).
func (p *axisPlan) shuffles() []uint8 {
	if p.shufKnown {
		if len(p.shuf) == 0 {
			return nil
		}
		return p.shuf
	}
	p.shufKnown = true
	quads := p.out / 4
	p.shuf = grow(p.shuf, 16*quads)
	for q := 0; q < quads; q++ {
		base := p.start[4*q]
		if p.start[4*q+3]-base+3 > 15 {
			p.shuf = p.shuf[:0]
			return nil
		}
		d := p.shuf[16*q : 16*q+16 : 16*q+16]
		for j := 0; j < 4; j++ {
			// Bytes o, o+1, o+2, o+3 for the output's four taps.
			binary.LittleEndian.PutUint32(d[4*j:], uint32(p.start[4*q+j]-base)*0x01010101+0x03020100)
		}
	}
	return p.shuf
}

// horiz8to16x1 resamples one row of a plane into the intermediate. src may run past the
// row (to the plane's end): the shuffling kernel's 16-byte loads may then read on.
func horiz8to16x1(dst []uint16, src []uint8, p *axisPlan) {
	x0 := 0
	if p.simd && p.out >= 4 {
		quads, groups := p.out/4, p.taps/4
		w := p.planeWeights()
		q := 0
		if sh := p.shuffles(); sh != nil {
			// The quads whose loads stay inside src: a prefix, as starts do not decrease.
			q = quads
			for q > 0 && int(p.start[4*(q-1)])+4*groups+12 > len(src) {
				q--
			}
			if q > 0 {
				horiz8to16x1ShufAVX2(&dst[0], &src[0], &p.start[0], &w[0], &sh[0], groups, q)
			}
		}
		if q < quads {
			horiz8to16x1AVX2(&dst[4*q], &src[0], &p.start[4*q], &w[16*groups*q], groups, quads-q)
		}
		x0 = 4 * quads
	}
	horizX1(dst[:p.out], src, p, x0, round1, shift1)
}

// horiz16to8x1 resamples one intermediate row of a plane into a row of the output.
func horiz16to8x1(dst []uint8, src []uint16, p *axisPlan) {
	x0 := 0
	if p.simd && p.out >= 4 {
		quads := p.out / 4
		horiz16to8x1AVX2(&dst[0], &src[0], &p.start[0], &p.planeWeights()[0], p.taps/4, quads)
		x0 = 4 * quads
	}
	horizX1(dst[:p.out], src, p, x0, round2, shift2)
}

// horizX1 is the Go kernel of both: outputs x0 onwards of one row, each the weighted sum
// of its taps, rounded and shifted to the destination's fixed point.
func horizX1[D, S uint8 | uint16](dst []D, src []S, p *axisPlan, x0 int, round int32, shift uint) {
	taps := p.taps
	for x := x0; x < len(dst); x++ {
		s := int(p.start[x])
		sp := src[s : s+taps]
		w := p.w[x*taps : x*taps+taps]
		w = w[:len(sp)]
		var a int32
		for k, wk := range w {
			a += int32(wk) * int32(sp[k])
		}
		dst[x] = D((a + round) >> shift)
	}
}

// resizeYCbCr resamples the spans sx, sy of the rectangle r of m (relative to m's origin)
// to w×h RGB in dst: each plane at its own resolution, then one conversion (resizePlanes);
// or, for colours far outside the RGB cube (gamutExcess) in an r no more than
// convertFirstArea times the output, r converted first and resampled as RGB. m's layout
// must be one chromaShifts knows, with its origin at (0, 0) and whole planes (as the
// JPEG decoders produce), holding r and the chroma samples next to it. A greyscale
// *image.Gray is resampled alone and replicated.
func (z *Resizer) resizeYCbCr(dst *Image, m image.Image, r image.Rectangle, sx, sy span, w, h int) *Image {
	if yc, ok := m.(*image.YCbCr); ok && int64(r.Dx())*int64(r.Dy()) <= convertFirstArea*int64(w)*int64(h) {
		hs, vs, _ := chromaShifts(yc.SubsampleRatio)
		if gamutExcess(yc, r, hs, vs, gamutLimit) {
			// Converting after resampling clamps only the output; a decoder clamps
			// every pixel before anything is resized, as torchvision's pipeline does,
			// and where many colours leave the RGB cube (saturated photos) the two
			// differ by 2-3 levels on average (42 dB). Such planes are converted first,
			// chroma upsampled as libjpeg-turbo does, and resampled as RGB.
			return z.resizeConverted(dst, yc, r, sx, sy, w, h)
		}
	}
	return z.resizePlanes(dst, m, r, sx, sy, w, h)
}

// resizeConverted is resize of the rectangle r of m converted to RGB (jpegUpsampler's
// convert), with resize's pass order and pixels, but each row is converted when the
// resampler first reads it, into a window of a few dozen rows, instead of the whole crop
// first: the crop's RGB (560 KB for a 500×375 photo) went through the cache between
// the two, and pushed the decoder's tables and planes out of it.
func (z *Resizer) resizeConverted(dst *Image, m *image.YCbCr, r image.Rectangle, sx, sy span, w, h int) *Image {
	cw, ch := r.Dx(), r.Dy()
	xp, yp := z.axisPlans(cw, ch, w, h, sx, sy)
	dst.Reset(w, h)
	cw3 := 3 * cw
	if !verticalFirst(cw, w, h, xp, yp) {
		// As horizontalFirst, each row converted just before its horizontal pass.
		lo, hi := int(yp.start[0]), int(yp.start[yp.out-1])+yp.taps
		w3 := 3 * w
		tmp := z.buffer((hi - lo) * w3)
		acc := z.accumulator(w3)
		// Slack after the row lets the AVX2 kernel compute the last outputs too.
		z.win = grow(z.win, cw3+16)
		for y := lo; y < hi; y++ {
			z.up.convertRows(z.win, cw3, m, r, r.Min.Y+y, r.Min.Y+y+1)
			horiz8to16(tmp[(y-lo)*w3:(y-lo+1)*w3], z.win, xp)
		}
		for y := 0; y < h; y++ {
			s := (int(yp.start[y]) - lo) * w3
			vert16to8(dst.Row(y), tmp[s:], w3, yp.w[y*yp.taps:(y+1)*yp.taps], w3, yp.simd, acc)
		}
		return dst
	}
	// As verticalFirst, reading the crop's rows [base, base+have) from the window. The
	// taps of successive output rows start no earlier than the last's, so the window
	// slides down: the rows still needed move to its top, the next ones are converted
	// below them, and each row is converted once.
	rows := min(yp.taps+32, ch)
	z.win = grow(z.win, rows*cw3)
	win := z.win
	tmp := z.buffer(h * cw3)
	acc := z.accumulator(cw3)
	base, have := 0, 0
	for y := 0; y < h; y++ {
		s := int(yp.start[y])
		if s+yp.taps > base+have {
			keep := max(base+have-s, 0)
			if keep > 0 {
				copy(win[:keep*cw3], win[(s-base)*cw3:(s-base+keep)*cw3])
			}
			base, have = s, keep
			n := min(rows, ch-base) - have
			z.up.convertRows(win[have*cw3:], cw3, m, r, r.Min.Y+base+have, r.Min.Y+base+have+n)
			have += n
		}
		vert8to16(tmp[y*cw3:(y+1)*cw3], win[(s-base)*cw3:], cw3, yp.w[y*yp.taps:(y+1)*yp.taps], cw3, yp.simd, acc)
	}
	for y := 0; y < h; y++ {
		horiz16to8(dst.Row(y), tmp[y*cw3:], xp)
	}
	return dst
}

// convertFirstArea bounds the crop, in times the output's area, that resizeYCbCr
// converts first: a libjpeg-turbo decode is DCT-scaled to at most about 5 times the
// output on a side, while the Go decoder's full-size planes may be far larger, and their
// RGB would cost memory the decode's footprint does not otherwise need.
const convertFirstArea = 25

// resizePlanes is resizeYCbCr's planar path: each plane resampled at its own
// resolution, then one conversion.
func (z *Resizer) resizePlanes(dst *Image, m image.Image, r image.Rectangle, sx, sy span, w, h int) *Image {
	n := w * h
	z.py = grow(z.py, n)
	dst.Reset(w, h)
	if g, ok := m.(*image.Gray); ok {
		z.resizePlane(z.py, g.Pix, g.Stride, r, sx, sy, w, h)
		for y := 0; y < h; y++ {
			d := dst.Row(y)[:3*w]
			for x, v := range z.py[y*w : (y+1)*w] {
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = v, v, v
			}
		}
		return dst
	}
	yc := m.(*image.YCbCr)
	hs, vs, _ := chromaShifts(yc.SubsampleRatio)
	z.resizePlane(z.py, yc.Y, yc.YStride, r, sx, sy, w, h)
	// The chroma plane's samples are centred on their luma blocks (JFIF), so a luma
	// coordinate maps to chroma by dividing by the subsampling factor.
	cw, ch := (yc.Rect.Dx()+1<<hs-1)>>hs, (yc.Rect.Dy()+1<<vs-1)>>vs
	cx0, cx1, csx := chromaSpan(r.Min.X, sx, hs, cw)
	cy0, cy1, csy := chromaSpan(r.Min.Y, sy, vs, ch)
	cr := image.Rect(cx0, cy0, cx1, cy1)
	z.pcb, z.pcr = grow(z.pcb, n), grow(z.pcr, n)
	z.resizePlane(z.pcb, yc.Cb, yc.CStride, cr, csx, csy, w, h)
	z.resizePlane(z.pcr, yc.Cr, yc.CStride, cr, csx, csy, w, h)
	for y := 0; y < h; y++ {
		ycbcrRow(dst.Row(y)[:3*w], z.py[y*w:(y+1)*w], z.pcb[y*w:(y+1)*w], z.pcr[y*w:(y+1)*w])
	}
	return dst
}

// ycbcrRow converts one row of full-resolution planes to packed RGB with
// color.YCbCrToRGB's arithmetic (with AVX2, eight pixels at a time).
func ycbcrRow(d, yr, cbr, crr []uint8) {
	cbr, crr = cbr[:len(yr)], crr[:len(yr)]
	d = d[:3*len(yr)]
	x0 := 0
	if useAVX2 && len(yr) >= 8 {
		blocks := len(yr) / 8
		ycbcrRowAVX2(&d[0], &yr[0], &cbr[0], &crr[0], blocks)
		x0 = 8 * blocks
	}
	for x := x0; x < len(yr); x++ {
		yv := yr[x]
		yy := int32(yv) * 0x10101
		cb1, cr1 := int32(cbr[x])-128, int32(crr[x])-128
		p := d[3*x : 3*x+3 : 3*x+3]
		p[0] = clampYCC(yy + 91881*cr1)
		p[1] = clampYCC(yy - 22554*cb1 - 46802*cr1)
		p[2] = clampYCC(yy + 116130*cb1)
	}
}

// chromaSpan maps the luma span sp starting at sample lo to a plane subsampled by 2^shift
// with n samples: the whole samples [c0, c1) it touches, and the span within them.
func chromaSpan(lo int, sp span, shift, n int) (c0, c1 int, cs span) {
	f := float64(int(1) << shift)
	a := (float64(lo) + sp.off) / f
	b := (float64(lo) + sp.off + sp.length) / f
	c0 = min(int(a), n-1)
	c1 = max(min(int(math.Ceil(b)), n), c0+1)
	return c0, c1, span{a - float64(c0), min(b, float64(c1)) - a}
}

// planar reports whether resizeYCbCr takes m.
func planar(m image.Image) bool {
	switch m := m.(type) {
	case *image.Gray:
		return m.Rect.Min == image.Point{}
	case *image.YCbCr:
		_, _, ok := chromaShifts(m.SubsampleRatio)
		return ok && m.Rect.Min == image.Point{}
	}
	return false
}

// gamutLimit is the mean excess (see gamutExcess) above which resizeYCbCr converts to
// RGB before resampling. Measured with bench/fidelity.sh on bench/imagenet-like.sh's
// photos against torchvision: every image below 45 dB had an excess of 0.13 or more, and
// 0.05 leaves none below 45 dB; about 45% of those photos (saturated wallpapers) then
// take the slower path, which the kernels' speed-ups pay for: the train recipe on that set
// costs within 1% (in instructions) of what it did before the path existed
// (bench/RESULTS.md). A larger limit converts fewer: at 0.5 about 10%, and some images
// stay at 43-45 dB.
const gamutLimit = 0.05

// gamutExcess reports whether, on average over the chroma samples of the rectangle r of
// m, the colours leave the RGB cube by more than limit: the levels each channel is
// clamped by, summed, each chroma sample taken with the luma sample at its top-left
// corner. It looks at every other chroma sample of every other chroma row (a sixteenth of
// a 4:2:0 image's pixels: 500×375 in about 9 µs with the AVX2 row kernel for 4:2:0 and
// 4:2:2, 70 µs in Go) and stops once the sum is over.
func gamutExcess(m *image.YCbCr, r image.Rectangle, hs, vs int, limit float64) bool {
	cx0, cx1 := r.Min.X>>hs, (r.Max.X-1)>>hs+1
	cy0, cy1 := r.Min.Y>>vs, (r.Max.Y-1)>>vs+1
	n := int64((cx1-cx0+1)/2) * int64((cy1-cy0+1)/2)
	over := int64(limit * float64(n))
	var sum int64
	for cy := cy0; cy < cy1; cy += 2 {
		y := min(max(cy<<vs, r.Min.Y), r.Max.Y-1)
		yr := m.Y[y*m.YStride:]
		cbr, crr := m.Cb[cy*m.CStride:][:cx1], m.Cr[cy*m.CStride:][:cx1]
		var row int32
		cx := cx0
		if hs == 1 && useAVX2 {
			if cx<<1 < r.Min.X { // the first sample's luma is clamped into r
				row += gamutSample(yr[r.Min.X], cbr[cx], crr[cx])
				cx += 2
			}
			// Blocks of 8 samples, whose chroma lies before cx1 and whose luma
			// bytes, read 32 at a time, lie within the plane.
			if blocks := min((cx1-cx)/16, (len(yr)-2*cx)/32); blocks > 0 {
				row += gamutRowAVX2(&yr[2*cx], &cbr[cx], &crr[cx], blocks)
				cx += 16 * blocks
			}
		}
		for ; cx < cx1; cx += 2 {
			x := min(max(cx<<hs, r.Min.X), r.Max.X-1)
			row += gamutSample(yr[x], cbr[cx], crr[cx])
		}
		if sum += int64(row); sum > over {
			return true
		}
	}
	return false
}

// gamutSample is one sample's excess: the levels its three channels are clamped by.
func gamutSample(y, cb, cr uint8) int32 {
	yy := int32(y)
	cb1, cr1 := int32(cb)-128, int32(cr)-128
	return excess(yy+(91881*cr1+1<<15)>>16) + excess(yy+(-22554*cb1-46802*cr1+1<<15)>>16) +
		excess(yy+(116130*cb1+1<<15)>>16)
}

// excess returns how far v lies outside [0, 255].
func excess(v int32) int32 {
	if v < 0 {
		return -v
	}
	return max(v-255, 0)
}
