package decode

import (
	"image"
	"image/color"
)

// toRGB converts m to packed 8-bit RGB in dst, sized to m's bounds. Alpha is dropped the
// way PIL's convert('RGB') drops it: the colour channels keep their non-premultiplied
// values (premultiplied images are un-premultiplied first, like color.NRGBAModel), and
// nothing is composited. 16-bit samples keep their high byte. YCbCr uses the fixed-point
// arithmetic of color.YCbCrToRGB and CMYK that of color.CMYKToRGB, so the pixels equal
// those of the standard library's conversions exactly.
//
// lut is scratch for paletted images. Every common type has its own row loop (about
// 1-2 ns a pixel); other types go through color.NRGBAModel one pixel at a time.
func toRGB(dst *Image, m image.Image, lut *[256][3]uint8) {
	b := m.Bounds()
	dst.Reset(b.Dx(), b.Dy())
	if b.Empty() {
		return
	}
	switch m := m.(type) {
	case *image.YCbCr:
		ycbcrToRGB(dst, m)
	case *image.NYCbCrA:
		ycbcrToRGB(dst, &m.YCbCr)
	case *image.Gray:
		for y := 0; y < dst.Height; y++ {
			s := m.Pix[(y)*m.Stride:][:dst.Width]
			d := dst.Row(y)[:3*len(s)]
			for x, v := range s {
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = v, v, v
			}
		}
	case *image.Gray16:
		for y := 0; y < dst.Height; y++ {
			s := m.Pix[y*m.Stride:][:2*dst.Width]
			d := dst.Row(y)
			for x := range dst.Width {
				v := s[2*x]
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = v, v, v
			}
		}
	case *image.NRGBA:
		for y := 0; y < dst.Height; y++ {
			s := m.Pix[y*m.Stride:][:4*dst.Width]
			d := dst.Row(y)
			for x := range dst.Width {
				q := s[4*x : 4*x+3 : 4*x+3]
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = q[0], q[1], q[2]
			}
		}
	case *image.NRGBA64:
		for y := 0; y < dst.Height; y++ {
			s := m.Pix[y*m.Stride:][:8*dst.Width]
			d := dst.Row(y)
			for x := range dst.Width {
				q := s[8*x : 8*x+5 : 8*x+5]
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = q[0], q[2], q[4]
			}
		}
	case *image.RGBA:
		fromRGBA(dst, m)
	case *image.RGBA64:
		fromRGBA64(dst, m)
	case *image.CMYK:
		fromCMYK(dst, m)
	case *image.Paletted:
		paletteLUT(lut, m.Palette)
		for y := 0; y < dst.Height; y++ {
			s := m.Pix[y*m.Stride:][:dst.Width]
			d := dst.Row(y)[:3*len(s)]
			for x, v := range s {
				c := &lut[v]
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = c[0], c[1], c[2]
			}
		}
	default:
		for y := 0; y < dst.Height; y++ {
			d := dst.Row(y)
			for x := range dst.Width {
				c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				d[3*x], d[3*x+1], d[3*x+2] = c.R, c.G, c.B
			}
		}
	}
}

// paletteLUT fills lut with the RGB of each palette entry, non-premultiplied. Indexes past
// the palette (which image/png tolerates) map to black.
func paletteLUT(lut *[256][3]uint8, p color.Palette) {
	for i := range lut {
		if i >= len(p) || p[i] == nil {
			lut[i] = [3]uint8{}
			continue
		}
		switch c := p[i].(type) {
		case color.NRGBA:
			lut[i] = [3]uint8{c.R, c.G, c.B}
			continue
		case color.NRGBA64:
			lut[i] = [3]uint8{uint8(c.R >> 8), uint8(c.G >> 8), uint8(c.B >> 8)}
			continue
		}
		// color.NRGBAModel's arithmetic, without boxing the result.
		r, g, b, a := p[i].RGBA()
		switch a {
		case 0xffff:
		case 0:
			r, g, b = 0, 0, 0
		default:
			r, g, b = r*0xffff/a, g*0xffff/a, b*0xffff/a
		}
		lut[i] = [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
	}
}

// ycbcrToRGB converts m with color.YCbCrToRGB's arithmetic. The common layouts (Rect at
// an even origin, as every decoder produces) share one chroma computation between the
// pixels of a subsampled pair; anything else goes pixel by pixel.
func ycbcrToRGB(dst *Image, m *image.YCbCr) {
	hs, vs, ok := chromaShifts(m.SubsampleRatio)
	if !ok {
		ycbcrSlow(dst, m)
		return
	}
	r := m.Rect
	if r.Min.X < 0 || r.Min.Y < 0 || r.Min.X&(1<<hs-1) != 0 || r.Min.Y&(1<<vs-1) != 0 {
		ycbcrSlow(dst, m)
		return
	}
	w := dst.Width
	cw := (w + 1<<hs - 1) >> hs // chroma samples per row
	for y := 0; y < dst.Height; y++ {
		yr := m.Y[y*m.YStride:][:w]
		co := (y >> vs) * m.CStride
		cb := m.Cb[co:][:cw]
		cr := m.Cr[co:][:cw]
		d := dst.Row(y)[:3*w]
		switch hs {
		case 0:
			cb, cr := cb[:len(yr)], cr[:len(yr)]
			for x, yv := range yr {
				cb1, cr1 := int32(cb[x])-128, int32(cr[x])-128
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = yccAdd(int32(yv), 91881*cr1, -22554*cb1-46802*cr1, 116130*cb1)
			}
		case 1:
			// Pairs of pixels share a chroma sample; an odd last pixel has its own.
			n := w / 2
			yp, dp, cbp, crp := yr[:2*n], d[:6*n], cb[:n], cr[:n]
			for cx := range cbp {
				cb1, cr1 := int32(cbp[cx])-128, int32(crp[cx])-128
				rc, gc, bc := 91881*cr1, -22554*cb1-46802*cr1, 116130*cb1
				yy := yp[2*cx : 2*cx+2 : 2*cx+2]
				p := dp[6*cx : 6*cx+6 : 6*cx+6]
				p[0], p[1], p[2] = yccAdd(int32(yy[0]), rc, gc, bc)
				p[3], p[4], p[5] = yccAdd(int32(yy[1]), rc, gc, bc)
			}
			if w&1 != 0 {
				p := d[3*w-3 : 3*w : 3*w]
				p[0], p[1], p[2] = ycc(int32(yr[w-1]), int32(cb[n])-128, int32(cr[n])-128)
			}
		default:
			for x, yv := range yr {
				c := x >> hs
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = ycc(int32(yv), int32(cb[c])-128, int32(cr[c])-128)
			}
		}
	}
}

// chromaShifts returns log2 of the horizontal and vertical chroma subsampling of r, or
// false for a ratio it does not know.
func chromaShifts(r image.YCbCrSubsampleRatio) (hs, vs int, ok bool) {
	switch r {
	case image.YCbCrSubsampleRatio444:
		return 0, 0, true
	case image.YCbCrSubsampleRatio422:
		return 1, 0, true
	case image.YCbCrSubsampleRatio420:
		return 1, 1, true
	case image.YCbCrSubsampleRatio440:
		return 0, 1, true
	case image.YCbCrSubsampleRatio411:
		return 2, 0, true
	case image.YCbCrSubsampleRatio410:
		return 2, 1, true
	}
	return 0, 0, false
}

// ycc is color.YCbCrToRGB with cb and cr already centred on zero.
func ycc(y, cb1, cr1 int32) (uint8, uint8, uint8) {
	return yccAdd(y, 91881*cr1, -22554*cb1-46802*cr1, 116130*cb1)
}

// yccAdd finishes color.YCbCrToRGB given the chroma terms: it adds luma (scaled by
// 0x10101) and clamps each channel to [0, 255] exactly as the standard library does.
func yccAdd(y, rc, gc, bc int32) (uint8, uint8, uint8) {
	yy1 := y * 0x10101
	return clampYCC(yy1 + rc), clampYCC(yy1 + gc), clampYCC(yy1 + bc)
}

// clampYCC is color.YCbCrToRGB's clamp of a 16.16 fixed-point channel to [0, 255].
func clampYCC(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}

// ycbcrSlow converts any YCbCr layout through the image's own offset arithmetic.
func ycbcrSlow(dst *Image, m *image.YCbCr) {
	r := m.Rect
	for y := 0; y < dst.Height; y++ {
		d := dst.Row(y)
		for x := range dst.Width {
			yi := m.YOffset(r.Min.X+x, r.Min.Y+y)
			ci := m.COffset(r.Min.X+x, r.Min.Y+y)
			d[3*x], d[3*x+1], d[3*x+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
		}
	}
}

// rgbScratch is the conversion scratch the Go backends share, kept in the Decoder.
type rgbScratch struct {
	lut    [256][3]uint8 // a paletted image's colours
	canvas Image         // a GIF frame smaller than its logical screen
	// pil converts 16-bit greyscale and CMYK as Pillow does (Options.Exact).
	pil bool
}

// convert is toRGB, with Pillow's conversions of 16-bit greyscale and CMYK when pil is
// set.
func (s *rgbScratch) convert(img *Image, m image.Image) {
	if s.pil {
		switch m := m.(type) {
		case *image.Gray16:
			gray16Clip(img, m)
			return
		case *image.CMYK:
			cmykPIL(img, m)
			return
		}
	}
	toRGB(img, m, &s.lut)
}

// cmykPIL converts CMYK to RGB as Pillow 9.4's cmyk2rgb does: each channel is
// (255-k) - round(c·(255-k)/255), where the standard library's color.CMYKToRGB, which
// toRGB follows, computes in 16 bits and truncates (up to 1 level apart).
func cmykPIL(dst *Image, m *image.CMYK) {
	b := m.Bounds()
	dst.Reset(b.Dx(), b.Dy())
	for y := range dst.Height {
		s := m.Pix[y*m.Stride:][:4*dst.Width]
		d := dst.Row(y)
		for x := range dst.Width {
			q := s[4*x : 4*x+4 : 4*x+4]
			p := d[3*x : 3*x+3 : 3*x+3]
			nk := 255 - int(q[3])
			for c := range 3 {
				t := int(q[c])*nk + 128 // MULDIV255
				p[c] = uint8(nk - (t+t>>8)>>8)
			}
		}
	}
}

// gray16Clip converts 16-bit greyscale to RGB as PIL's convert('RGB') does: Pillow 9.4
// opens such a PNG in mode I (32-bit integers) and its I -> RGB conversion clamps each
// value to [0, 255], so every level above 255 becomes white, where toRGB keeps the high
// byte (a faithful scaling, but not PIL's).
func gray16Clip(dst *Image, m *image.Gray16) {
	b := m.Bounds()
	dst.Reset(b.Dx(), b.Dy())
	for y := range dst.Height {
		s := m.Pix[y*m.Stride:][:2*dst.Width]
		d := dst.Row(y)
		for x := range dst.Width {
			v := uint8(255)
			if s[2*x] == 0 {
				v = s[2*x+1]
			}
			p := d[3*x : 3*x+3 : 3*x+3]
			p[0], p[1], p[2] = v, v, v
		}
	}
}

// toRGBRegion converts the part rs (relative to m's origin) of a decoded image to RGB in
// img, rounded out to the chroma grid, and returns where rs lies in img.
func (s *rgbScratch) toRGBRegion(img *Image, m image.Image, rs image.Rectangle) image.Rectangle {
	b := m.Bounds()
	sub, ok := m.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok || rs == b.Sub(b.Min) {
		s.convert(img, m)
		return rs
	}
	ra := alignRect(m, rs.Add(b.Min))
	s.convert(img, sub.SubImage(ra))
	return rs.Add(b.Min).Sub(ra.Min)
}

// alignRect rounds r out to the chroma grid of a subsampled YCbCr image, so that its
// sub-image keeps the fast conversion path; other images need no rounding.
func alignRect(m image.Image, r image.Rectangle) image.Rectangle {
	y := asYCbCr(m)
	if y == nil {
		return r
	}
	hs, vs, ok := chromaShifts(y.SubsampleRatio)
	if !ok {
		return r
	}
	o := y.Rect.Min
	r.Min.X = o.X + (r.Min.X-o.X)>>hs<<hs
	r.Min.Y = o.Y + (r.Min.Y-o.Y)>>vs<<vs
	return r
}

// asYCbCr returns the YCbCr planes of m, or nil if it has none.
func asYCbCr(m image.Image) *image.YCbCr {
	switch m := m.(type) {
	case *image.YCbCr:
		return m
	case *image.NYCbCrA:
		return &m.YCbCr
	}
	return nil
}

// fromRGBA writes premultiplied 8-bit RGBA as non-premultiplied RGB, as
// color.NRGBAModel does.
func fromRGBA(dst *Image, m *image.RGBA) {
	for y := 0; y < dst.Height; y++ {
		s := m.Pix[y*m.Stride:][:4*dst.Width]
		d := dst.Row(y)
		for x := range dst.Width {
			q := s[4*x : 4*x+4 : 4*x+4]
			p := d[3*x : 3*x+3 : 3*x+3]
			switch a := uint32(q[3]); a {
			case 0xff:
				p[0], p[1], p[2] = q[0], q[1], q[2]
			case 0:
				p[0], p[1], p[2] = 0, 0, 0
			default:
				// color.NRGBAModel on the 16-bit expansions (v*0x101) reduces to this.
				p[0] = uint8(uint32(q[0]) * 0xffff / a >> 8)
				p[1] = uint8(uint32(q[1]) * 0xffff / a >> 8)
				p[2] = uint8(uint32(q[2]) * 0xffff / a >> 8)
			}
		}
	}
}

// fromRGBA64 writes premultiplied 16-bit RGBA as non-premultiplied 8-bit RGB, as
// color.NRGBAModel does, keeping the high bytes.
func fromRGBA64(dst *Image, m *image.RGBA64) {
	for y := 0; y < dst.Height; y++ {
		s := m.Pix[y*m.Stride:][:8*dst.Width]
		d := dst.Row(y)
		for x := range dst.Width {
			q := s[8*x : 8*x+8 : 8*x+8]
			p := d[3*x : 3*x+3 : 3*x+3]
			switch a := uint32(q[6])<<8 | uint32(q[7]); a {
			case 0xffff:
				p[0], p[1], p[2] = q[0], q[2], q[4]
			case 0:
				p[0], p[1], p[2] = 0, 0, 0
			default:
				p[0] = uint8((uint32(q[0])<<8 | uint32(q[1])) * 0xffff / a >> 8)
				p[1] = uint8((uint32(q[2])<<8 | uint32(q[3])) * 0xffff / a >> 8)
				p[2] = uint8((uint32(q[4])<<8 | uint32(q[5])) * 0xffff / a >> 8)
			}
		}
	}
}

// fromCMYK writes CMYK as RGB with color.CMYKModel's arithmetic.
func fromCMYK(dst *Image, m *image.CMYK) {
	for y := 0; y < dst.Height; y++ {
		s := m.Pix[y*m.Stride:][:4*dst.Width]
		d := dst.Row(y)
		for x := range dst.Width {
			q := s[4*x : 4*x+4 : 4*x+4]
			p := d[3*x : 3*x+3 : 3*x+3]
			w := 0xffff - uint32(q[3])*0x101
			p[0] = uint8((0xffff - uint32(q[0])*0x101) * w / 0xffff >> 8)
			p[1] = uint8((0xffff - uint32(q[1])*0x101) * w / 0xffff >> 8)
			p[2] = uint8((0xffff - uint32(q[2])*0x101) * w / 0xffff >> 8)
		}
	}
}
