package decode

import "image"

// transposes reports whether EXIF orientation o swaps width and height.
func transposes(o int) bool { return o >= 5 && o <= 8 }

// orient writes src with EXIF orientation o applied into dst (which must not share memory
// with src), as PIL's ImageOps.exif_transpose does:
//
//	1 as stored            5 transpose (swap x and y)
//	2 mirror left-right    6 rotate 90° clockwise
//	3 rotate 180°          7 transverse (transpose, then rotate 180°)
//	4 mirror top-bottom    8 rotate 90° counter-clockwise
//
// Output pixel (x, y) reads the source at origin + x*stepX + y*stepY bytes. Orientations
// that keep rows walk them sequentially; the transposing ones go in 32×32 tiles so that
// both images stay in cache (about 1 ns a pixel).
func orient(dst, src *Image, o int) {
	w, h, s := src.Width, src.Height, src.Stride
	last := 3 * (w - 1)   // byte offset of the last pixel of a row
	bottom := (h - 1) * s // byte offset of the last row
	var origin, stepX, stepY int
	switch o {
	case 2:
		origin, stepX, stepY = last, -3, s
	case 3:
		origin, stepX, stepY = bottom+last, -3, -s
	case 4:
		origin, stepX, stepY = bottom, 3, -s
	case 5:
		origin, stepX, stepY = 0, s, 3
	case 6:
		origin, stepX, stepY = bottom, -s, 3
	case 7:
		origin, stepX, stepY = bottom+last, -s, -3
	case 8:
		origin, stepX, stepY = last, s, -3
	default:
		origin, stepX, stepY = 0, 3, s
	}
	if transposes(o) {
		dst.Reset(h, w)
	} else {
		dst.Reset(w, h)
	}
	ow, oh := dst.Width, dst.Height
	if stepX == 3 || stepX == -3 {
		for y := 0; y < oh; y++ {
			d := dst.Row(y)
			o := origin + y*stepY
			if stepX == 3 {
				copy(d, src.Pix[o:o+3*ow])
				continue
			}
			row := src.Pix[o-3*(ow-1) : o+3]
			for x := 0; x < ow; x++ {
				p := row[len(row)-3-3*x:][:3]
				q := d[3*x : 3*x+3 : 3*x+3]
				q[0], q[1], q[2] = p[0], p[1], p[2]
			}
		}
		return
	}
	const tile = 32
	for ty := 0; ty < oh; ty += tile {
		for tx := 0; tx < ow; tx += tile {
			for y := ty; y < min(ty+tile, oh); y++ {
				d := dst.Row(y)
				o := origin + y*stepY + tx*stepX
				for x := tx; x < min(tx+tile, ow); x++ {
					p := src.Pix[o : o+3 : o+3]
					q := d[3*x : 3*x+3 : 3*x+3]
					q[0], q[1], q[2] = p[0], p[1], p[2]
					o += stepX
				}
			}
		}
	}
}

// storedRect maps r, a rectangle of an image with EXIF orientation o applied, to the
// same pixels of the image as stored (w×h), inverting orient's mapping.
func storedRect(r image.Rectangle, o, w, h int) image.Rectangle {
	// Half-open ranges: mirroring [a, b) in n samples gives [n-b, n-a).
	x0, x1, y0, y1 := r.Min.X, r.Max.X, r.Min.Y, r.Max.Y
	switch o {
	case 2:
		return image.Rect(w-x1, y0, w-x0, y1)
	case 3:
		return image.Rect(w-x1, h-y1, w-x0, h-y0)
	case 4:
		return image.Rect(x0, h-y1, x1, h-y0)
	case 5:
		return image.Rect(y0, x0, y1, x1)
	case 6:
		return image.Rect(y0, h-x1, y1, h-x0)
	case 7:
		return image.Rect(w-y1, h-x1, w-y0, h-x0)
	case 8:
		return image.Rect(w-y1, x0, w-y0, x1)
	}
	return r
}
