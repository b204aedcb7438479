package synth

import (
	"image"
	"image/color"
)

// toPlanes converts img to level-shifted Y (and Cb, Cr unless gray) planes of
// pw x ph samples, replicating the last column and row into the padding.
func toPlanes(img image.Image, pw, ph int, gray bool) [3][]float32 {
	b := img.Bounds()
	width, height := b.Dx(), b.Dy()
	n := 3
	if gray {
		n = 1
	}
	var planes [3][]float32
	for i := range n {
		planes[i] = make([]float32, pw*ph)
	}
	rowRGB := make([]uint8, 3*width)
	for y := range height {
		rgbRow(img, b.Min.Y+y, rowRGB)
		py, pcb, pcr := planes[0][y*pw:(y+1)*pw], planes[1], planes[2]
		for x := range width {
			r, g, bl := float32(rowRGB[3*x]), float32(rowRGB[3*x+1]), float32(rowRGB[3*x+2])
			py[x] = 0.299*r + 0.587*g + 0.114*bl - 128
			if !gray {
				pcb[y*pw+x] = -0.168736*r - 0.331264*g + 0.5*bl
				pcr[y*pw+x] = 0.5*r - 0.418688*g - 0.081312*bl
			}
		}
	}
	for i := range n {
		p := planes[i]
		for y := range height {
			row := p[y*pw : (y+1)*pw]
			for x := width; x < pw; x++ {
				row[x] = row[width-1]
			}
		}
		for y := height; y < ph; y++ {
			copy(p[y*pw:(y+1)*pw], p[(height-1)*pw:height*pw])
		}
	}
	return planes
}

// rgbRow fills dst with the 8-bit RGB of row y of img, reading Pix directly
// for the common image types.
func rgbRow(img image.Image, y int, dst []uint8) {
	b := img.Bounds()
	switch m := img.(type) {
	case *image.NRGBA:
		src := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < len(dst); x += 3 {
			dst[x], dst[x+1], dst[x+2] = src[0], src[1], src[2]
			src = src[4:]
		}
	case *image.RGBA:
		src := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < len(dst); x += 3 {
			dst[x], dst[x+1], dst[x+2] = src[0], src[1], src[2]
			src = src[4:]
		}
	case *image.Gray:
		src := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < len(dst); x += 3 {
			dst[x], dst[x+1], dst[x+2] = src[x/3], src[x/3], src[x/3]
		}
	default:
		for x := 0; x < len(dst); x += 3 {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x/3, y)).(color.NRGBA)
			dst[x], dst[x+1], dst[x+2] = c.R, c.G, c.B
		}
	}
}

// halve averages 2x2 neighbourhoods of a pw x ph plane.
func halve(p []float32, pw, ph int) []float32 {
	qw := pw / 2
	q := make([]float32, qw*(ph/2))
	for y := range ph / 2 {
		r0, r1 := p[2*y*pw:], p[(2*y+1)*pw:]
		for x := range qw {
			q[y*qw+x] = 0.25 * (r0[2*x] + r0[2*x+1] + r1[2*x] + r1[2*x+1])
		}
	}
	return q
}

// fdctPlane transforms and quantises every 8x8 block of a plane with the
// given stride, returning coefficients in zig-zag order.
func fdctPlane(p []float32, stride, bw, bh int, quant *[64]int) []int16 {
	var div [64]float32
	for k := range div {
		div[k] = 1 / (float32(quant[k]) * aan[k/8] * aan[k%8] * 8)
	}
	out := make([]int16, 64*bw*bh)
	var blk [64]float32
	for by := range bh {
		for bx := range bw {
			for y := range 8 {
				copy(blk[8*y:8*y+8], p[(8*by+y)*stride+8*bx:])
			}
			fdct(&blk)
			o := out[64*(by*bw+bx):]
			for zz, k := range unzig {
				v := blk[k] * div[k]
				var q int
				if v < 0 {
					q = -int(0.5 - v)
				} else {
					q = int(v + 0.5)
				}
				// Keep within the ranges the standard tables can code
				// (AC category 10, DC difference category 11).
				o[zz] = int16(min(max(q, -1023), 1023))
			}
		}
	}
	return out
}

// fdct is the AAN float forward DCT (Arai, Agui, Nakajima; libjpeg's
// jfdctflt). Outputs are scaled by 8*aan[u]*aan[v].
func fdct(d *[64]float32) {
	for i := range 2 {
		// Pass 0 transforms rows, pass 1 columns.
		step, next := 1, 8
		if i == 1 {
			step, next = 8, 1
		}
		for r := range 8 {
			o := r * next
			d0, d1, d2, d3 := d[o], d[o+step], d[o+2*step], d[o+3*step]
			d4, d5, d6, d7 := d[o+4*step], d[o+5*step], d[o+6*step], d[o+7*step]
			t0, t7 := d0+d7, d0-d7
			t1, t6 := d1+d6, d1-d6
			t2, t5 := d2+d5, d2-d5
			t3, t4 := d3+d4, d3-d4

			t10, t13 := t0+t3, t0-t3
			t11, t12 := t1+t2, t1-t2
			d[o] = t10 + t11
			d[o+4*step] = t10 - t11
			z1 := (t12 + t13) * 0.707106781
			d[o+2*step] = t13 + z1
			d[o+6*step] = t13 - z1

			t10, t11, t12 = t4+t5, t5+t6, t6+t7
			z5 := (t10 - t12) * 0.382683433
			z2 := 0.541196100*t10 + z5
			z4 := 1.306562965*t12 + z5
			z3 := t11 * 0.707106781
			z11, z13 := t7+z3, t7-z3
			d[o+5*step] = z13 + z2
			d[o+3*step] = z13 - z2
			d[o+1*step] = z11 + z4
			d[o+7*step] = z11 - z4
		}
	}
}
