package decode

import "image"

// VP8 (lossy WebP) stores limited-range BT.601 Y'CbCr, not the full-range JFIF Y'CbCr that
// image.YCbCr and color.YCbCrToRGB assume, so golang.org/x/image/webp's output converted
// the standard way comes out washed out (black at 16, a mean error near 8 per channel).
// webpToRGB instead reproduces libwebp's own conversion, which is what PIL returns: its
// "fancy" upsampler, which interpolates chroma with weights 9/16, 3/16, 3/16, 1/16 from
// the four nearest samples, and its 14-bit fixed-point BT.601 matrix (src/dsp/yuv.h and
// src/dsp/upsampling.c in libwebp, EmitFancyRGB in src/dec/io_dec.c). VP8 decoding is
// bit-exact, so the pixels equal libwebp's.

// webpToRGB converts a lossy WebP frame (4:2:0, rectangle at the origin) to RGB.
func webpToRGB(dst *Image, m *image.YCbCr) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	dst.Reset(w, h)
	if w == 0 || h == 0 {
		return
	}
	cw := (w + 1) / 2
	uvRow := func(k int) ([]uint8, []uint8) {
		o := k * m.CStride
		return m.Cb[o : o+cw], m.Cr[o : o+cw]
	}
	yRow := func(y int) []uint8 { return m.Y[y*m.YStride : y*m.YStride+w] }
	// The first row interpolates chroma row 0 with itself.
	u0, v0 := uvRow(0)
	webpLinePair(dst.Row(0), nil, yRow(0), nil, u0, v0, u0, v0)
	// Rows 2k-1 and 2k lie between chroma rows k-1 and k.
	y := 1
	for ; y+1 < h; y += 2 {
		tu, tv := uvRow(y / 2)
		cu, cv := uvRow(y/2 + 1)
		webpLinePair(dst.Row(y), dst.Row(y+1), yRow(y), yRow(y+1), tu, tv, cu, cv)
	}
	// With an even height the last row has only the last chroma row.
	if y < h {
		u, v := uvRow(y / 2)
		webpLinePair(dst.Row(y), nil, yRow(y), nil, u, v, u, v)
	}
}

// webpLinePair is libwebp's UpsampleRgbLinePair: it converts the luma rows ty (top) and
// by (bottom, may be nil) using chroma rows tu/tv (above both) and cu/cv (below both).
// Each chroma value is interpolated as (9*near + 3*side + 3*vertical + diagonal) / 16 with
// libwebp's rounding; u and v are packed in one word as libwebp does.
func webpLinePair(top, bot, ty, by, tu, tv, cu, cv []uint8) {
	w := len(ty)
	load := func(u, v []uint8, x int) uint32 { return uint32(u[x]) | uint32(v[x])<<16 }
	tl, l := load(tu, tv, 0), load(cu, cv, 0)
	put := func(d []uint8, x int, y uint8, uv uint32) {
		p := d[3*x : 3*x+3 : 3*x+3]
		p[0], p[1], p[2] = webpYUVToRGB(int(y), int(uv&0xff), int(uv>>16))
	}
	put(top, 0, ty[0], (3*tl+l+0x00020002)>>2)
	if bot != nil {
		put(bot, 0, by[0], (3*l+tl+0x00020002)>>2)
	}
	for x := 1; x <= (w-1)>>1; x++ {
		t, uv := load(tu, tv, x), load(cu, cv, x)
		avg := tl + t + l + uv + 0x00080008
		diag12 := (avg + 2*(t+l)) >> 3
		diag03 := (avg + 2*(tl+uv)) >> 3
		put(top, 2*x-1, ty[2*x-1], (diag12+tl)>>1&0x00ff00ff)
		put(top, 2*x, ty[2*x], (diag03+t)>>1&0x00ff00ff)
		if bot != nil {
			put(bot, 2*x-1, by[2*x-1], (diag03+l)>>1&0x00ff00ff)
			put(bot, 2*x, by[2*x], (diag12+uv)>>1&0x00ff00ff)
		}
		tl, l = t, uv
	}
	if w&1 == 0 {
		put(top, w-1, ty[w-1], (3*tl+l+0x00020002)>>2)
		if bot != nil {
			put(bot, w-1, by[w-1], (3*l+tl+0x00020002)>>2)
		}
	}
}

// webpYUVToRGB is libwebp's VP8YuvToRgb.
func webpYUVToRGB(y, u, v int) (uint8, uint8, uint8) {
	yy := y * 19077 >> 8
	return webpClip8(yy + v*26149>>8 - 14234),
		webpClip8(yy - u*6419>>8 - v*13320>>8 + 8708),
		webpClip8(yy + u*33050>>8 - 17685)
}

// webpClip8 is libwebp's VP8Clip8 for values with 6 fractional bits.
func webpClip8(v int) uint8 {
	const mask = 256<<6 - 1
	if v&^mask == 0 {
		return uint8(v >> 6)
	}
	if v < 0 {
		return 0
	}
	return 255
}
