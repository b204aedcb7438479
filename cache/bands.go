package cache

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/klauspost/compress/s2"
)

// An s2 payload (format version 2) is the image cut into bands of whole rows, each
// compressed on its own, so that a reader decompresses only the bands a crop keeps (a
// random-resized crop keeps about two thirds of the rows on average):
//
//	u32 rows per band · for each band a u32: its stored length, with bandRaw set when
//	it is stored as is · the bands, in order
//
// A band that s2 does not shrink by at least an eighth is stored as is, as Snappy's
// framing format does with such chunks: reading it is then a copy, several times faster
// than decompressing it, for at most an eighth more bytes.
const (
	// bandBytes is the target size of a band's pixels: small enough that a crop's first
	// and last bands waste little, large enough that s2 finds its matches (rows of a
	// photo repeat little beyond a few rows) and the table stays small.
	bandBytes = 16 << 10
	bandRaw   = 1 << 31
)

// bandRows is the number of rows in a band of a width-pixel-wide image.
func bandRows(width int) int { return max(1, bandBytes/max(3*width, 1)) }

// encodeBands appends the s2 payload of the width×height packed RGB pixels pix to dst.
func encodeBands(dst, pix []byte, width, height int) ([]byte, error) {
	rows, stride := bandRows(width), 3*width
	bands := (height + rows - 1) / rows
	if s2.MaxEncodedLen(rows*stride) < 0 {
		return nil, errors.New("cache: image rows too large for s2")
	}
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(rows))
	table := len(dst)
	dst = grow(dst, 4*bands)[:table+4*bands]
	for b := range bands {
		band := pix[b*rows*stride : min((b+1)*rows, height)*stride]
		n := s2.MaxEncodedLen(len(band))
		dst = grow(dst, n)
		out := s2.Encode(dst[len(dst):len(dst)+n], band)
		word := uint32(len(out))
		if len(out) > len(band)-len(band)/8 {
			out = append(dst[len(dst):], band...) // n ≥ len(band): no reallocation
			word = uint32(len(band)) | bandRaw
		}
		le.PutUint32(dst[table+4*b:], word)
		dst = dst[:len(dst)+len(out)]
	}
	return dst, nil
}

// decodeBands decompresses the bands of the s2 payload of a width×height image that
// hold rows y0 to y1-1 into dst and returns the first row it holds. The band table is
// checked whole (every band's length, the payload's), the bands it reads in full.
func decodeBands(dst *decode.Image, payload []byte, width, height, y0, y1 int) (top int, err error) {
	le := binary.LittleEndian
	if len(payload) < 4 {
		return 0, fmt.Errorf("%d bytes, no band table", len(payload))
	}
	rows, stride := int(le.Uint32(payload)), 3*width
	if want := bandRows(width); rows != want {
		return 0, fmt.Errorf("%d rows per band, want %d for width %d", rows, want, width)
	}
	bands := (height + rows - 1) / rows
	if len(payload) < 4+4*bands {
		return 0, fmt.Errorf("%d bytes for a table of %d bands", len(payload), bands)
	}
	table, data := payload[4:4+4*bands], payload[4+4*bands:]
	if y0 == y1 { // nothing to decode; the table still has to add up
		y0, y1 = 0, 0
	}
	b0, b1 := y0/rows, (y1+rows-1)/rows
	dst.Reset(width, min(b1*rows, height)-b0*rows)
	off := 0
	for b := range bands {
		word := le.Uint32(table[4*b:])
		n := int(word &^ bandRaw)
		if n > len(data)-off {
			return 0, fmt.Errorf("band %d of %d: %d bytes past the payload's end", b, bands, n-(len(data)-off))
		}
		if b >= b0 && b < b1 {
			src := data[off : off+n]
			out := dst.Pix[(b-b0)*rows*stride : (min((b+1)*rows, height)-b0*rows)*stride]
			if word&bandRaw != 0 {
				if n != len(out) {
					return 0, fmt.Errorf("band %d: %d raw bytes for %d", b, n, len(out))
				}
				copy(out, src)
			} else {
				if m, err := s2.DecodedLen(src); err != nil || m != len(out) {
					return 0, fmt.Errorf("band %d: decoded length %d for %d bytes: %v", b, m, len(out), err)
				}
				if _, err := s2.Decode(out, src); err != nil {
					return 0, fmt.Errorf("band %d: %w", b, err)
				}
			}
		}
		off += n
	}
	if off != len(data) {
		return 0, fmt.Errorf("%d bytes after the last band", len(data)-off)
	}
	return b0 * rows, nil
}
