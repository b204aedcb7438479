package decode

import "image"

// Chroma upsampling as libjpeg-turbo does it by default ("fancy" upsampling, jdsample.c
// in 2.1): a subsampled chroma sample sits at the centre of the luma samples it covers,
// and each luma sample's chroma is interpolated from the nearest chroma sample (weight
// 3/4) and the next nearest (1/4) along each subsampled axis, the image's edge samples
// repeated beyond it. PIL, and so torchvision, decode JPEGs through libjpeg with these
// defaults; replicating each chroma sample instead moves a colour edge by half a chroma
// sample and is up to a hundred levels off next to it.
//
// The rounding is libjpeg-turbo's, bit for bit: horizontal 2:1 (4:2:2) rounds the left
// output of a pair with a bias of 1 and the right one with 2 (out of 4); 2:1 both ways
// (4:2:0) sums columns vertically first (3·near + far) and rounds the pair with 8 and 7
// (out of 16); vertical 2:1 alone (4:4:0) rounds the upper row of a pair with 1 and the
// lower with 2. Where the chroma is two samples wide or less, libjpeg-turbo replicates
// (4:2:2 and 4:2:0), and so does this; 4:1:1 and 4:1:0 are replicated by libjpeg-turbo
// too, so they are left to the plain conversion.

// jpegUpsampler holds the rows of upsampled chroma, reused from one image to the next.
type jpegUpsampler struct {
	cb, cr []uint8
}

// toRGB converts the whole planes m, as jpegFast decodes them, to RGB in dst with
// libjpeg-turbo's chroma upsampling and color.YCbCrToRGB's arithmetic. It reports false,
// converting nothing, for a layout that libjpeg-turbo does not upsample that way.
func (u *jpegUpsampler) toRGB(dst *Image, m *image.YCbCr) bool {
	hs, vs, ok := chromaShifts(m.SubsampleRatio)
	if !ok || hs > 1 || hs+vs == 0 || m.Rect.Min != (image.Point{}) {
		return false
	}
	u.convert(dst, m, m.Rect)
	return true
}

// convert converts the rectangle r of the planes m (any layout chromaShifts knows,
// origin at (0, 0)) to RGB in dst, sized to r: chroma upsampled as libjpeg-turbo does
// (4:2:2, 4:2:0, 4:4:0), or replicated where it replicates (4:1:1, 4:1:0). It reads the
// chroma samples of r and one more on each side, within the image; chroma rows past the
// planes' last one (a decode that stopped below r) count as the image's edge.
func (u *jpegUpsampler) convert(dst *Image, m *image.YCbCr, r image.Rectangle) {
	dst.Reset(r.Dx(), r.Dy())
	u.convertRows(dst.Pix, dst.Stride, m, r, r.Min.Y, r.Max.Y)
}

// convertRows is convert for rows y0 to y1-1 of r (in m's coordinates) only, written
// stride bytes apart from the start of d: each row's pixels are the same as convert's.
func (u *jpegUpsampler) convertRows(d []uint8, stride int, m *image.YCbCr, r image.Rectangle, y0, y1 int) {
	hs, vs, _ := chromaShifts(m.SubsampleRatio)
	w, h := m.Rect.Dx(), m.Rect.Dy()
	cw, ch := (w+1<<hs-1)>>hs, (h+1<<vs-1)>>vs // chroma samples that hold the image
	if m.CStride > 0 {
		ch = min(ch, len(m.Cb)/m.CStride, len(m.Cr)/m.CStride)
	}
	// The chroma columns read: r's and a neighbour each side, whose outputs are wrong
	// (the slice's ends count as edges) but unused, except at the image's own edges.
	c0, c1 := max(r.Min.X>>hs-1, 0), min((r.Max.X-1)>>hs+2, cw)
	x0 := r.Min.X - c0<<hs // r's first pixel in the upsampled row
	n := (c1 - c0) << hs
	u.cb, u.cr = grow(u.cb, n), grow(u.cr, n)
	cb, cr := u.cb[:n], u.cr[:n]
	rw := r.Dx()
	for y := y0; y < y1; y++ {
		cy := min(y>>vs, ch-1)
		near := cy * m.CStride
		far := near // the next nearest chroma row, the edge rows repeated
		if vs == 1 {
			if y&1 == 0 {
				far = max(cy-1, 0) * m.CStride
			} else {
				far = min(cy+1, ch-1) * m.CStride
			}
		}
		ncb, ncr := m.Cb[near+c0:near+c1], m.Cr[near+c0:near+c1]
		fcb, fcr := m.Cb[far+c0:far+c1], m.Cr[far+c0:far+c1]
		switch {
		case hs == 0 && vs == 0: // 4:4:4
			cb, cr = ncb, ncr
		case hs == 0: // 4:4:0
			bias := int32(1 + y&1)
			upsampleV(cb, ncb, fcb, bias)
			upsampleV(cr, ncr, fcr, bias)
		case hs == 2 || cw <= 2: // libjpeg-turbo replicates these
			replicateH(cb, ncb, hs)
			replicateH(cr, ncr, hs)
		case vs == 0: // 4:2:2
			upsampleH(cb, ncb)
			upsampleH(cr, ncr)
		default: // 4:2:0
			upsampleHV(cb, ncb, fcb)
			upsampleHV(cr, ncr, fcr)
		}
		o := (y - y0) * stride
		ycbcrRow(d[o:o+3*rw], m.Y[y*m.YStride+r.Min.X:][:rw], cb[x0:x0+rw], cr[x0:x0+rw])
	}
}

// upsampleV is libjpeg-turbo's h1v2_fancy_upsample for one output row: 3/4 of the
// nearest row and 1/4 of the next nearest, bias 1 for the upper row of a pair and 2 for
// the lower.
func upsampleV(dst, near, far []uint8, bias int32) {
	dst = dst[:len(near)]
	far = far[:len(near)]
	for x, v := range near {
		dst[x] = uint8((3*int32(v) + int32(far[x]) + bias) >> 2)
	}
}

// replicateH repeats each sample of src 2^shift times into dst.
func replicateH(dst, src []uint8, shift int) {
	k := 1 << shift
	dst = dst[:k*len(src)]
	for x, v := range src {
		for i := range k {
			dst[k*x+i] = v
		}
	}
}

// upsampleH is libjpeg-turbo's h2v1_fancy_upsample for one row of at least three
// samples: each output 3/4 of its own sample and 1/4 of the neighbour on its side, bias
// 1 on the left of a pair and 2 on the right, the edge samples repeated (which gives the
// library's special cases for the first and last columns).
func upsampleH(dst, src []uint8) {
	n := len(src)
	dst = dst[:2*n]
	prev := int32(src[0])
	for c := 1; c < n; c++ {
		v := int32(src[c-1])
		this, next := 3*v, int32(src[c])
		d := dst[2*c-2 : 2*c : 2*c]
		d[0] = uint8((this + prev + 1) >> 2)
		d[1] = uint8((this + next + 2) >> 2)
		prev = v
	}
	this := 3 * int32(src[n-1])
	dst[2*n-2] = uint8((this + prev + 1) >> 2)
	dst[2*n-1] = src[n-1]
}

// upsampleHV is libjpeg-turbo's h2v2_fancy_upsample for one output row from the nearest
// chroma row and the next nearest, of at least three samples: column sums 3·near + far,
// then 3/4 of a column's sum and 1/4 of its neighbour's, bias 8 on the left of a pair and
// 7 on the right (out of 16), the edge columns repeated.
func upsampleHV(dst, near, far []uint8) {
	n := len(near)
	dst = dst[:2*n]
	far = far[:n]
	last := 3*int32(near[0]) + int32(far[0])
	this := last
	c := 1 // the next sample whose column sum is read
	if useAVX2 && n >= 18 {
		// Samples 1 to 16*blocks, with their neighbours; 0 and the last are the edges.
		blocks := (n - 2) / 16
		upsampleHVAVX2(&dst[2], &near[1], &far[1], blocks)
		if (n-2)%16 != 0 {
			// Samples n-17 to n-2 as one more block, overlapping the last one: the
			// same outputs again where they overlap, and cheaper than a Go tail of up
			// to 15 samples, which cost as much as the kernel.
			upsampleHVAVX2(&dst[2*(n-17)], &near[n-17], &far[n-17], 1)
		}
		dst[0] = uint8((4*this + 8) >> 4)
		dst[1] = uint8((3*this + 3*int32(near[1]) + int32(far[1]) + 7) >> 4)
		c = n - 1
		last = 3*int32(near[c-2]) + int32(far[c-2])
		this = 3*int32(near[c-1]) + int32(far[c-1])
		// The loop below writes the outputs of sample n-2 again, as the kernel did.
	}
	for ; c < n; c++ {
		next := 3*int32(near[c]) + int32(far[c])
		d := dst[2*c-2 : 2*c : 2*c]
		t := 3 * this
		d[0] = uint8((t + last + 8) >> 4)
		d[1] = uint8((t + next + 7) >> 4)
		last, this = this, next
	}
	dst[2*n-2] = uint8((3*this + last + 8) >> 4)
	dst[2*n-1] = uint8((4*this + 7) >> 4)
}
