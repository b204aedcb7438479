package decode

import (
	"image"
	"math"
)

// Pillow's fixed point (src/libImaging/Resample.c, Pillow 9.4): coefficients are the
// normalised filter weights times 2^22, each rounded half away from zero on its own (so
// they need not sum to exactly 2^22); every sum starts at 2^21 and is shifted right by 22,
// then clamped to [0, 255].
const (
	pilBits = 32 - 8 - 2 // PRECISION_BITS
	pilHalf = 1 << (pilBits - 1)
)

// exactPlan is Pillow's precompute_coeffs for the bilinear filter along one axis: n
// source samples to out, the box being the whole axis.
type exactPlan struct {
	n, out int
	taps   int     // coefficients stored per output: the largest count
	start  []int32 // first source sample of each output (xmin)
	count  []int32 // its number of samples (xmax - xmin)
	k      []int32 // out*taps coefficients in Pillow's fixed point
	fw     []float64
}

// compute fills p as precompute_coeffs and normalize_coeffs_8bpc do, in the same float64
// operations in the same order. The explicit float64 conversions keep the compiler from
// fusing a multiply and an add (the Go spec allows it, C on amd64 does not do it), which
// could move a coefficient by one unit.
func (p *exactPlan) compute(n, out int) {
	p.n, p.out = n, out
	// box = (0, 0, n, ...): in0 = 0 and in1 = n are C floats, exact below 2^24.
	scale := float64(float32(n)) / float64(out)
	filterscale := max(scale, 1)
	support := 1.0 * filterscale // BILINEAR's support is 1
	ss := 1.0 / filterscale
	p.start = grow(p.start, out)
	p.count = grow(p.count, out)
	taps := 1
	for xx := range out {
		center := float64((float64(xx) + 0.5) * scale)
		xmin := max(int(center-support+0.5), 0) // C's (int) truncates, as Go's conversion
		xmax := min(int(center+support+0.5), n)
		p.start[xx], p.count[xx] = int32(xmin), int32(xmax-xmin)
		taps = max(taps, xmax-xmin)
	}
	p.taps = taps
	p.k = grow(p.k, out*taps)
	clear(p.k)
	p.fw = grow(p.fw, taps)
	for xx := range out {
		center := float64((float64(xx) + 0.5) * scale)
		xmin, cnt := int(p.start[xx]), int(p.count[xx])
		fw := p.fw[:cnt]
		ww := 0.0
		for x := range fw {
			t := float64((float64(x+xmin) - center + 0.5) * ss)
			fw[x] = bilinearFilter(t)
			ww += fw[x]
		}
		k := p.k[xx*taps : xx*taps+cnt]
		for x := range fw {
			w := fw[x]
			if ww != 0 {
				w /= ww
			}
			f := float64(w * (1 << pilBits))
			if w < 0 {
				k[x] = int32(-0.5 + f)
			} else {
				k[x] = int32(0.5 + f)
			}
		}
	}
}

// bilinearFilter is Pillow's bilinear_filter: a triangle of support 1.
func bilinearFilter(x float64) float64 {
	x = math.Abs(x)
	if x < 1 {
		return 1 - x
	}
	return 0
}

// clipPIL is Pillow's clip8: the sum shifted right (arithmetically) and clamped.
func clipPIL(v int32) uint8 {
	v >>= pilBits
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return uint8(v)
}

// exactPlan returns the cached plan for n -> out.
func (z *Resizer) exactPlan(n, out int, keep *exactPlan) *exactPlan {
	for i := range z.eplans {
		if p := &z.eplans[i]; p.n == n && p.out == out {
			return p
		}
	}
	p := &z.eplans[z.enext]
	if p == keep {
		z.enext = (z.enext + 1) % len(z.eplans)
		p = &z.eplans[z.enext]
	}
	z.enext = (z.enext + 1) % len(z.eplans)
	p.compute(n, out)
	return p
}

// resizeExact is Resize with Pillow 9.4's arithmetic, bit for bit: what
// PIL.Image.crop(r).resize((w, h), Image.BILINEAR) gives on an RGB image, which is how
// torchvision 0.14's Resize, CenterCrop-free resized crops (F.resized_crop) and
// RandomResizedCrop resample PIL images.
//
// Like ImagingResampleInner it runs the horizontal pass first, only on the rows the
// vertical pass reads, into an 8-bit intermediate (each sum rounded and clamped), then the
// vertical pass; a pass whose axis keeps its length is skipped, as Pillow skips it.
func (z *Resizer) resizeExact(dst, src *Image, r image.Rectangle, w, h int) *Image {
	cw, ch := r.Dx(), r.Dy()
	xp := z.exactPlan(cw, w, nil)
	yp := z.exactPlan(ch, h, xp)
	needH, needV := w != cw, h != ch
	dst.Reset(w, h)
	x0 := 3 * r.Min.X
	if !needH && !needV {
		for y := range h {
			copy(dst.Row(y), src.Pix[(r.Min.Y+y)*src.Stride+x0:][:3*w])
		}
		return dst
	}
	// The intermediate: rows lo..hi-1 of the crop, horizontally resampled, or the crop
	// itself when only the vertical pass runs.
	mid, midStride, lo := src.Pix[r.Min.Y*src.Stride+x0:], src.Stride, 0
	if needH {
		hi := ch // without the vertical pass, every row (h == ch)
		if needV {
			lo, hi = int(yp.start[0]), int(yp.start[h-1]+yp.count[h-1])
		}
		w3 := 3 * w
		z.etmp = grow(z.etmp, (hi-lo)*w3)
		y := lo
		for ; y+1 < hi; y += 2 {
			row := (r.Min.Y+y)*src.Stride + x0
			exactRows2(z.etmp[(y-lo)*w3:(y-lo+2)*w3], src.Pix[row:][:3*cw], src.Pix[row+src.Stride:][:3*cw], xp)
		}
		if y < hi {
			exactRow(z.etmp[(y-lo)*w3:(y-lo+1)*w3], src.Pix[(r.Min.Y+y)*src.Stride+x0:][:3*cw], xp)
		}
		if !needV {
			for y := range h {
				copy(dst.Row(y), z.etmp[y*w3:(y+1)*w3])
			}
			return dst
		}
		mid, midStride = z.etmp, w3
	}
	// Sums of two neighbouring samples share a uint64, as in exactRow.
	n := 3 * w
	z.eacc = grow(z.eacc, (n+1)/2)
	acc := z.eacc
	for y := range h {
		for j := range acc {
			acc[j] = pilHalf | pilHalf<<32
		}
		s := int(yp.start[y]) - lo
		k := yp.k[y*yp.taps : y*yp.taps+int(yp.count[y])]
		for t, kt := range k {
			macPIL(acc, mid[(s+t)*midStride:][:n], uint64(kt))
		}
		d := dst.Row(y)[:n]
		for j, a := range acc[:n/2] {
			d[2*j], d[2*j+1] = clipPIL(int32(uint32(a))), clipPIL(int32(a>>32))
		}
		if n%2 == 1 {
			d[n-1] = clipPIL(int32(uint32(acc[n/2])))
		}
	}
	return dst
}

// macPIL adds k*row[2j] and k*row[2j+1] to the halves of acc[j].
func macPIL(acc []uint64, row []uint8, k uint64) {
	for j := range acc {
		if len(row) < 2 {
			if len(row) == 1 {
				acc[j] += uint64(row[0]) * k
			}
			return
		}
		acc[j] += (uint64(row[0]) | uint64(row[1])<<32) * k
		row = row[2:]
	}
}

// exactRow resamples one row of packed RGB (the crop's cw pixels) to p.out pixels.
//
// Red and green share a uint64, one in each 32-bit half: the bilinear filter's
// coefficients are never negative, so each half's sum stays below 2^21 + 255·(2^22 + taps)
// < 2^31 and never carries into the other, and each half holds exactly Pillow's int32 sum.
// That saves a third of the multiplies.
func exactRow(dst, src []uint8, p *exactPlan) {
	taps := p.taps
	dst = dst[:3*p.out]
	for x := 0; len(dst) >= 3; x++ {
		s, c := 3*int(p.start[x]), int(p.count[x])
		k := p.k[x*taps : x*taps+c]
		sp := src[s : s+3*c]
		rg, b := uint64(pilHalf)|uint64(pilHalf)<<32, uint64(pilHalf)
		// Walking sp three bytes at a time lets the compiler drop the bounds checks.
		for _, kt := range k {
			if len(sp) < 3 {
				break
			}
			kk := uint64(kt)
			rg += (uint64(sp[0]) | uint64(sp[1])<<32) * kk
			b += uint64(sp[2]) * kk
			sp = sp[3:]
		}
		dst[0], dst[1], dst[2] = clipPIL(int32(uint32(rg))), clipPIL(int32(rg>>32)), clipPIL(int32(b))
		dst = dst[3:]
	}
}

// exactRows2 is exactRow on two rows at once, a and b, into dst's first and second
// p.out pixels: they share the coefficients and the loop, and their sums are independent
// chains the CPU overlaps.
func exactRows2(dst, a, b []uint8, p *exactPlan) {
	taps := p.taps
	w3 := 3 * p.out
	da, db := dst[:w3], dst[w3:2*w3]
	for x := 0; len(da) >= 3 && len(db) >= 3; x++ {
		s, c := 3*int(p.start[x]), int(p.count[x])
		k := p.k[x*taps : x*taps+c]
		sa, sb := a[s:s+3*c], b[s:s+3*c]
		const half2 = uint64(pilHalf) | uint64(pilHalf)<<32
		rga, ba, rgb, bb := half2, uint64(pilHalf), half2, uint64(pilHalf)
		for _, kt := range k {
			if len(sa) < 3 || len(sb) < 3 {
				break
			}
			kk := uint64(kt)
			rga += (uint64(sa[0]) | uint64(sa[1])<<32) * kk
			ba += uint64(sa[2]) * kk
			rgb += (uint64(sb[0]) | uint64(sb[1])<<32) * kk
			bb += uint64(sb[2]) * kk
			sa, sb = sa[3:], sb[3:]
		}
		da[0], da[1], da[2] = clipPIL(int32(uint32(rga))), clipPIL(int32(rga>>32)), clipPIL(int32(ba))
		db[0], db[1], db[2] = clipPIL(int32(uint32(rgb))), clipPIL(int32(rgb>>32)), clipPIL(int32(bb))
		da, db = da[3:], db[3:]
	}
}
