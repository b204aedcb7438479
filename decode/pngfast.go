package decode

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/conveyor-ml/conveyor/internal/libdeflate"
)

// pngFast decodes the common PNGs — 8-bit grey, grey+alpha, RGB, RGBA or palette, not
// interlaced — with libdeflate inflating the whole image data in one call and the
// filtered rows turned straight into packed RGB, without image/png's NRGBA image in
// between. It declines everything else (16-bit, low bit depths, interlacing, anything
// damaged), and image/png decides those, so both paths accept the same files and give the
// same pixels and errors.
type pngFast struct {
	z    *libdeflate.Decompressor
	idat []byte // the IDAT chunks' data, concatenated
	raw  []byte // the inflated, filtered rows
	lut  [256][3]uint8
}

// libdeflateName is the PNG backend's name, which PNGBackend reports.
const libdeflateName = "libdeflate"

func openPNGFast() (backend, error) {
	lib, err := libdeflate.Load()
	if err != nil {
		return nil, err
	}
	z, err := lib.NewDecompressor()
	if err != nil {
		return nil, err
	}
	return &pngFast{z: z}, nil
}

func (p *pngFast) close() error {
	p.z.Close()
	return nil
}

func (p *pngFast) name() string { return libdeflateName }

func (p *pngFast) accepts(h *header) bool { return h.format == PNG }

// decode decodes the whole image into j.img, or declines.
func (p *pngFast) decode(j *job) (decoded, error) {
	if !p.decodeRGB(j.img, j.data, j.h.width, j.h.height) {
		return decoded{}, errDeclined
	}
	sx, sy := wholeSpans(j.rs)
	return decoded{crop: j.rs, sx: sx, sy: sy}, nil
}

// footprint: the image data gathered from the IDAT chunks (at most the file), and for
// the PNGs it takes the inflated rows and the RGB image; it declines the others before
// inflating.
func (p *pngFast) footprint(j *job) estimate {
	w, h := int64(j.h.width), int64(j.h.height)
	e := estimate{bytes: int64(len(j.data)), rgb: true, src: j.rs.Size()}
	ihdr, ok := pngIHDR(j.data)
	if !ok || ihdr.depth != 8 || ihdr.interlace != 0 || ihdr.channels() == 0 {
		return e
	}
	e.bytes += (1+w*int64(ihdr.channels()))*h + 3*w*h
	e.sure = true
	return e
}

// decodeRGB decodes data, a w×h PNG, into img and reports whether it did; on false
// img's contents are unspecified.
func (p *pngFast) decodeRGB(img *Image, data []byte, w, h int) bool {
	const sig = 8
	var (
		ihdr     []byte
		palette  []byte
		sawIDAT  bool
		idatDone bool
	)
	// One allocation for the image data, not one per doubling: what Footprint counts.
	if n := pngDataSize(data); cap(p.idat) < n {
		p.idat = make([]byte, 0, n)
	}
	p.idat = p.idat[:0]
	for i := sig; ; {
		if i+12 > len(data) {
			return false // no IEND
		}
		n := int(binary.BigEndian.Uint32(data[i:]))
		if n < 0 || n > len(data)-i-12 {
			return false
		}
		kind := data[i+4 : i+8]
		body := data[i+8 : i+8+n]
		if crc32.ChecksumIEEE(data[i+4:i+8+n]) != binary.BigEndian.Uint32(data[i+8+n:]) {
			return false
		}
		i += 12 + n
		switch string(kind) {
		case "IHDR":
			ihdr = body
		case "PLTE":
			palette = body
		case "IDAT":
			if idatDone {
				return false
			}
			sawIDAT = true
			p.idat = append(p.idat, body...)
		case "IEND":
			if ihdr == nil || !sawIDAT {
				return false
			}
			return p.pixels(img, ihdr, palette, w, h)
		default:
			if kind[0]&0x20 == 0 {
				return false // an unknown critical chunk
			}
		}
		if sawIDAT && string(kind) != "IDAT" {
			idatDone = true
		}
	}
}

// pngDataSize returns the total size of the IDAT chunks that lie within data.
func pngDataSize(data []byte) int {
	total := 0
	for i := 8; i+12 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[i:]))
		if n < 0 || n > len(data)-i-12 {
			break
		}
		if string(data[i+4:i+8]) == "IDAT" {
			total += n
		}
		i += 12 + n
	}
	return total
}

// pixels inflates and unfilters the image data gathered by decodeRGB.
func (p *pngFast) pixels(img *Image, ihdr, palette []byte, w, h int) bool {
	if len(ihdr) != 13 || int(binary.BigEndian.Uint32(ihdr)) != w || int(binary.BigEndian.Uint32(ihdr[4:])) != h ||
		ihdr[8] != 8 || ihdr[10] != 0 || ihdr[11] != 0 || ihdr[12] != 0 {
		return false // not 8-bit, or an unknown method, or interlaced
	}
	ct := ihdr[9]
	var bpp int
	switch ct {
	case 0, 3:
		bpp = 1
	case 4:
		bpp = 2
	case 2:
		bpp = 3
	case 6:
		bpp = 4
	default:
		return false
	}
	npal := len(palette) / 3
	if ct == 3 {
		if npal == 0 || len(palette)%3 != 0 || npal > 256 {
			return false
		}
		for k := range npal {
			p.lut[k] = [3]uint8{palette[3*k], palette[3*k+1], palette[3*k+2]}
		}
	}
	stride := 1 + w*bpp
	p.raw = grow(p.raw, stride*h)
	if p.z.Zlib(p.raw, p.idat) != nil {
		return false
	}
	img.Reset(w, h)
	var prev []byte // the previous unfiltered row; nil for the first
	for y := range h {
		row := p.raw[y*stride : (y+1)*stride]
		cur := row[1:]
		if !unfilter(row[0], cur, prev, bpp) {
			return false
		}
		prev = cur
		d := img.Row(y)
		switch ct {
		case 0:
			for x, v := range cur {
				q := d[3*x : 3*x+3 : 3*x+3]
				q[0], q[1], q[2] = v, v, v
			}
		case 4:
			for x := range w {
				v := cur[2*x]
				q := d[3*x : 3*x+3 : 3*x+3]
				q[0], q[1], q[2] = v, v, v
			}
		case 2:
			copy(d, cur)
		case 6:
			for x := range w {
				s := cur[4*x : 4*x+3 : 4*x+3]
				q := d[3*x : 3*x+3 : 3*x+3]
				q[0], q[1], q[2] = s[0], s[1], s[2]
			}
		case 3:
			for x, v := range cur {
				if int(v) >= npal {
					return false // image/png decides what an out-of-palette index means
				}
				c := &p.lut[v]
				q := d[3*x : 3*x+3 : 3*x+3]
				q[0], q[1], q[2] = c[0], c[1], c[2]
			}
		}
	}
	return true
}

// unfilter reverses PNG filter f on cur in place, given the previous unfiltered row
// (nil for the first row, which filters against zeros); bpp is bytes per pixel.
func unfilter(f byte, cur, prev []byte, bpp int) bool {
	if f == 4 && prev == nil {
		f = 1 // Paeth against a zero row is Sub
	}
	switch f {
	case 0: // None
	case 1: // Sub
		for i := bpp + unfilterFast(1, cur, cur, bpp); i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case 2: // Up
		if prev != nil {
			prev = prev[:len(cur)]
			for i := range cur {
				cur[i] += prev[i]
			}
		}
	case 3: // Average
		if prev == nil {
			for i := bpp; i < len(cur); i++ {
				cur[i] += cur[i-bpp] / 2
			}
			break
		}
		prev = prev[:len(cur)]
		for i := range bpp {
			cur[i] += prev[i] / 2
		}
		for i := bpp + unfilterFast(3, cur, prev, bpp); i < len(cur); i++ {
			cur[i] += uint8((int(cur[i-bpp]) + int(prev[i])) / 2)
		}
	case 4: // Paeth
		prev = prev[:len(cur)]
		for i := range bpp {
			cur[i] += prev[i]
		}
		for i := bpp + unfilterFast(4, cur, prev, bpp); i < len(cur); i++ {
			cur[i] += paeth(cur[i-bpp], prev[i], prev[i-bpp])
		}
	default:
		return false
	}
	return true
}

// unfilterFast unfilters what it can of cur after its first pixel with the assembly
// kernels (3- and 4-byte pixels, where the CPU has them; about 6 times as fast as the Go
// loops on Paeth rows) and returns the number of bytes done; the Go loops do the rest.
// prev is as long as cur.
func unfilterFast(f int, cur, prev []byte, bpp int) int {
	if !useUnfilterAVX || bpp != 3 && bpp != 4 {
		return 0
	}
	// Pixel k is read as the 4 bytes at k*bpp, up to the one after the last done.
	pixels := (len(cur)-4)/bpp - 1
	if pixels < 1 {
		return 0
	}
	unfilterAVX(f, &cur[0], &prev[0], pixels, bpp)
	return pixels * bpp
}

// paeth is the PNG Paeth predictor of a (left), b (above) and c (above left).
func paeth(a, b, c uint8) uint8 {
	pa := int(b) - int(c)
	pb := int(a) - int(c)
	pc := pa + pb
	pa, pb, pc = abs(pa), abs(pb), abs(pc)
	if pa <= pb && pa <= pc {
		return a
	}
	if pb <= pc {
		return b
	}
	return c
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
