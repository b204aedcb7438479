package decode

import (
	"bytes"
	"errors"
	"fmt"
)

// A header's pixel count is checked twice before any pixel memory is allocated: against
// Options.MaxPixels (ErrTooLarge), and against what the file's size can possibly hold (a
// *FormatError). The second check stops a few hundred bytes that claim a 12000×12000
// image, within the default limit, from making a decoder allocate hundreds of megabytes
// before it finds the data missing. The bounds come from each format's best possible
// compression, so no valid file fails them:
//
//   - PNG: deflate encodes at most 258 bytes in 2 bits (1032:1), so the filtered rows
//     (a filter byte plus ⌈width·bits per pixel/8⌉ bytes each) are at most 1032 times
//     the file's size.
//   - JPEG with Huffman coding (baseline, extended, progressive): every 8×8 block of the
//     full-resolution component costs at least one bit (its DC code in the first scan),
//     so at most 512 pixels per byte.
//   - GIF: an LZW code is at least 3 bits and expands to at most 4096 pixels, so at most
//     10923 pixels per byte of file, for the logical screen (which is what is allocated).
//   - Lossy WebP (VP8): every 16×16 macroblock spends more than one bit on its luma and
//     chroma modes (their key-frame probabilities are fixed), so at most 2048 pixels per
//     byte; this bound allows twice that.
//   - BMP: only uncompressed BMPs decode, at least 1 bit per pixel.
//
// Lossless WebP (VP8L) can spend zero bits on a pixel, arithmetic-coded JPEG and TIFF's
// codecs come close: for them MaxPixels is the only bound.

// fileBound returns what h claims from a file of data's size, and the most such a file
// can hold, in the same unit (bytes of filtered rows for PNG, pixels for the others); have
// is 0 where the format admits no bound.
func fileBound(h header, data []byte) (need, have int64, unit string) {
	n := int64(len(data))
	pixels := int64(h.width) * int64(h.height)
	switch h.format {
	case PNG:
		if rows, ok := pngRowBytes(data, h.width, h.height); ok {
			return rows, 1032 * n, "bytes of rows"
		}
	case JPEG:
		switch h.sof {
		case 0xc0, 0xc1, 0xc2: // Huffman: baseline, extended, progressive
			return pixels, 512 * n, "pixels"
		}
	case GIF:
		return pixels, 10923 * n, "pixels"
	case WebP:
		if _, _, lossless, ok := webpFrameSize(data); ok && !lossless {
			return pixels, 4096 * n, "pixels"
		}
	case BMP:
		return pixels, 8 * n, "pixels"
	}
	return pixels, 0, "pixels"
}

// pngRowBytes returns the size of a PNG's filtered rows from its IHDR, and whether the
// IHDR was readable.
func pngRowBytes(data []byte, w, h int) (int64, bool) {
	if len(data) < 26 {
		return 0, false
	}
	depth, colour := int64(data[24]), data[25]
	var channels int64
	switch colour {
	case 0, 3: // grey, palette
		channels = 1
	case 2: // RGB
		channels = 3
	case 4: // grey + alpha
		channels = 2
	case 6: // RGBA
		channels = 4
	default:
		return 0, false
	}
	bits := int64(w) * channels * depth
	return int64(h) * (1 + (bits+7)/8), true
}

// check applies the pixel limit and the file-size bound to h, read from data.
func (h header) check(data []byte, limit int64) error {
	if err := checkSize(h.width, h.height, limit); err != nil {
		return err
	}
	if need, have, unit := fileBound(h, data); have > 0 && need > have {
		return &FormatError{Format: h.format, Err: fmt.Errorf("header claims %dx%d (%d %s), more than a %d-byte file can hold: truncated or malicious", h.width, h.height, need, unit, len(data))}
	}
	if progressive(h.sof) {
		if n := countScans(data, MaxScans); n > MaxScans {
			return &FormatError{Format: h.format, Err: fmt.Errorf("%w: more than %d (a progressive JPEG needs about 10)", ErrTooManyScans, MaxScans)}
		}
	}
	return nil
}

// MaxScans bounds the scans of a progressive JPEG, as libjpeg-turbo's TJFLAG_LIMITSCANS
// does: every scan revisits the whole image, so a small file of thousands of tiny scans
// costs minutes of CPU ("Two Issues with the JPEG Standard", libjpeg-turbo's security
// notes). Ordinary encoders write about 10. Both backends refuse more, before decoding.
const MaxScans = 500

// ErrTooManyScans is wrapped by the *FormatError of a progressive JPEG with more than
// MaxScans scans.
var ErrTooManyScans = errors.New("too many scans")

// progressive reports whether sof starts a progressive frame (Huffman or arithmetic).
func progressive(sof byte) bool {
	return sof == 0xc2 || sof == 0xc6 || sof == 0xca || sof == 0xce
}

// countScans counts start-of-scan markers in data, stopping once it passes limit. Entropy
// coded data never holds 0xff 0xda (a 0xff there is followed by a stuffed zero or a
// restart marker), so the count is the scans plus any in metadata such as an EXIF
// thumbnail: a few more, never fewer. It runs at memchr speed.
func countScans(data []byte, limit int) int {
	n := 0
	for n <= limit {
		i := bytes.Index(data, sos)
		if i < 0 {
			break
		}
		n++
		data = data[i+2:]
	}
	return n
}

var sos = []byte{0xff, 0xda}
