package decode

import "github.com/conveyor-ml/conveyor/internal/jpegseg"

// Small bounded parsers for the few header fields the standard decoders do not expose.
// They read untrusted data: every index is checked, every loop advances, and anything
// unexpected makes them give up with a neutral answer.

// jpegMarkers is what one walk over a JPEG's segments before its first scan finds: the
// loader reads every sample's header twice, so the header fields come from one walk.
type jpegMarkers struct {
	sof         byte   // the first frame header's marker (see jpegseg.IsSOF), 0 if none
	frame       []byte // that frame header's body
	orientation int    // the first valid EXIF orientation (1 to 8), 1 if none
}

// scanJPEG walks data's segments once, until it has the first frame header and a valid
// EXIF orientation or reaches the first scan. The orientation is tag 0x0112 of the first
// IFD of an APP1 "Exif" segment, in either byte order.
//
// The walk is strict: it stops at anything that is not a marker where one must be and at
// a segment that runs past the end of data, and gives up at a stuffed zero (FF 00), TEM
// or a second SOI before the first scan, where image/jpeg skips two bytes or fails where
// a length would be read. Giving up rather than guessing keeps it from seeing other
// segments than image/jpeg does, so that no frame is smuggled past MaxPixels.
func scanJPEG(data []byte) jpegMarkers {
	m := jpegMarkers{orientation: 1}
	exif := false
	w := jpegseg.Walker{Data: data, Pos: 2} // after SOI
	for m.sof == 0 || !exif {
		s, err := w.Next()
		if err != nil {
			break
		}
		switch mk := s.Marker; {
		case mk >= jpegseg.RST0 && mk <= jpegseg.RST7:
			continue
		case jpegseg.Standalone(mk), mk == jpegseg.SOS: // FF 00, TEM, SOI, EOI; the scan
			return m
		case jpegseg.IsSOF(mk):
			if m.sof == 0 {
				m.sof, m.frame = mk, s.Body
			}
		case mk == jpegseg.APP1 && !exif && len(s.Body) >= 6 && string(s.Body[:6]) == "Exif\x00\x00":
			if v := exifOrientation(s.Body[6:]); v != 0 {
				m.orientation, exif = v, true
			}
		}
	}
	return m
}

// frameSize returns the size in the frame header when the frame is one image/jpeg reads
// the same way (Huffman-coded baseline, extended or progressive, 8-bit, with 1, 3 or 4
// components, a complete component list and a non-zero size); ok is false otherwise.
func (m jpegMarkers) frameSize() (w, h int, ok bool) {
	seg := m.frame
	if (m.sof != jpegseg.SOF0 && m.sof != jpegseg.SOF1 && m.sof != jpegseg.SOF2) || len(seg) < 6 || seg[0] != 8 {
		return 0, 0, false
	}
	n := int(seg[5])
	w, h = int(seg[3])<<8|int(seg[4]), int(seg[1])<<8|int(seg[2])
	return w, h, (n == 1 || n == 3 || n == 4) && len(seg) == 6+3*n && w > 0 && h > 0
}

// jpegOrientation returns the EXIF orientation (1 to 8) of a JPEG, or 1 if it has no
// valid one.
func jpegOrientation(data []byte) int { return scanJPEG(data).orientation }

// jpegFrameSize is scanJPEG(data).frameSize().
func jpegFrameSize(data []byte) (w, h int, ok bool) { return scanJPEG(data).frameSize() }

// exifOrientation reads the orientation tag from a TIFF-structured EXIF block, returning
// 0 if there is none or it is out of range.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var u16 func(b []byte) int
	var u32 func(b []byte) int
	switch string(t[:4]) {
	case "II*\x00":
		u16 = func(b []byte) int { return int(b[0]) | int(b[1])<<8 }
		u32 = func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24 }
	case "MM\x00*":
		u16 = func(b []byte) int { return int(b[1]) | int(b[0])<<8 }
		u32 = func(b []byte) int { return int(b[3]) | int(b[2])<<8 | int(b[1])<<16 | int(b[0])<<24 }
	default:
		return 0
	}
	off := u32(t[4:8])
	if off < 8 || off > len(t)-2 {
		return 0
	}
	count := u16(t[off:])
	for k := 0; k < count; k++ {
		e := off + 2 + 12*k
		if e+12 > len(t) {
			return 0
		}
		if u16(t[e:]) != 0x0112 {
			continue
		}
		var v int
		switch typ, n := u16(t[e+2:]), u32(t[e+4:]); {
		case typ == 3 && n >= 1: // SHORT: the value sits in the first two bytes
			v = u16(t[e+8:])
		case typ == 4 && n >= 1: // LONG, from lax writers
			v = u32(t[e+8:])
		default:
			return 0
		}
		if v >= 1 && v <= 8 {
			return v
		}
		return 0
	}
	return 0
}

// gifFirstPalette returns the colour table the first frame of a GIF uses (its local table
// if it has one, else the global one) and the frame's transparent index (-1 if none). The
// standard decoder replaces the transparent entry with transparent black; PIL keeps its
// colour when converting to RGB, so the decoder puts it back.
func gifFirstPalette(data []byte) (table []byte, transparent int) {
	transparent = -1
	if len(data) < 13 {
		return nil, -1
	}
	i := 13
	if flags := data[10]; flags&0x80 != 0 {
		n := 3 << (flags&7 + 1)
		if i+n > len(data) {
			return nil, -1
		}
		table = data[i : i+n]
		i += n
	}
	for i < len(data) {
		switch data[i] {
		case 0x21: // extension: label, then sub-blocks
			if i+2 > len(data) {
				return nil, -1
			}
			label := data[i+1]
			i += 2
			if label == 0xf9 && i+5 <= len(data) && data[i] == 4 {
				if data[i+1]&1 != 0 {
					transparent = int(data[i+4])
				} else {
					transparent = -1
				}
			}
			for i < len(data) && data[i] != 0 {
				i += 1 + int(data[i])
			}
			i++ // block terminator
		case 0x2c: // image descriptor
			if i+10 > len(data) {
				return nil, -1
			}
			if flags := data[i+9]; flags&0x80 != 0 {
				n := 3 << (flags&7 + 1)
				if i+10+n > len(data) {
					return nil, -1
				}
				table = data[i+10 : i+10+n]
			}
			return table, transparent
		default: // trailer or garbage
			return nil, -1
		}
	}
	return nil, -1
}

// webpFrameSize returns the size in the first VP8 or VP8L chunk of a WebP file, and
// whether that chunk is VP8L (lossless).
func webpFrameSize(data []byte) (w, h int, lossless, ok bool) {
	i := 12
	for i+8 <= len(data) {
		id := string(data[i : i+4])
		n := int(data[i+4]) | int(data[i+5])<<8 | int(data[i+6])<<16 | int(data[i+7])<<24
		body := data[i+8:]
		if n >= 0 && n < len(body) {
			body = body[:n]
		}
		switch id {
		case "VP8 ":
			// Frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height.
			if len(body) < 10 || body[3] != 0x9d || body[4] != 0x01 || body[5] != 0x2a {
				return 0, 0, false, false
			}
			return (int(body[6]) | int(body[7])<<8) & 0x3fff, (int(body[8]) | int(body[9])<<8) & 0x3fff, false, true
		case "VP8L":
			// Signature 0x2f, then 14-bit width-1 and height-1.
			if len(body) < 5 || body[0] != 0x2f {
				return 0, 0, false, false
			}
			b := int(body[1]) | int(body[2])<<8 | int(body[3])<<16 | int(body[4])<<24
			return b&0x3fff + 1, (b>>14)&0x3fff + 1, true, true
		}
		if n < 0 || n > len(data) {
			return 0, 0, false, false
		}
		i += 8 + n + n&1 // chunks are padded to an even size
	}
	return 0, 0, false, false
}

// pngHeader is what a PNG's IHDR says about its samples.
type pngHeader struct {
	depth, colour, interlace byte
}

// pngIHDR reads the IHDR chunk, which must come first.
func pngIHDR(data []byte) (pngHeader, bool) {
	if len(data) < 29 || string(data[12:16]) != "IHDR" {
		return pngHeader{}, false
	}
	return pngHeader{depth: data[24], colour: data[25], interlace: data[28]}, true
}

// channels returns the samples per pixel of the colour type, 0 for an unknown one.
func (p pngHeader) channels() int {
	switch p.colour {
	case 0, 3: // grey, palette
		return 1
	case 2: // RGB
		return 3
	case 4: // grey + alpha
		return 2
	case 6: // RGBA
		return 4
	}
	return 0
}

// pngHasTRNS reports whether a tRNS chunk comes before the image data.
func pngHasTRNS(data []byte) bool {
	for i := 8; i+8 <= len(data); {
		n := int(data[i])<<24 | int(data[i+1])<<16 | int(data[i+2])<<8 | int(data[i+3])
		switch string(data[i+4 : i+8]) {
		case "tRNS":
			return true
		case "IDAT", "IEND":
			return false
		}
		if n < 0 || n > len(data)-i-12 {
			return false
		}
		i += 12 + n
	}
	return false
}
