package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// WithOrientation returns a copy of the JPEG data with an EXIF APP1 segment
// whose IFD0 holds only the orientation tag (0x0112) set to orientation, 1 to
// 8. The TIFF header is big-endian ("MM") if bigEndian and little-endian
// ("II") otherwise. The segment goes right after SOI and any APP0 (JFIF)
// segments, where libjpeg and exiftool put it; an EXIF segment already in
// the data is dropped.
func WithOrientation(jpeg []byte, orientation int, bigEndian bool) ([]byte, error) {
	if orientation < 1 || orientation > 8 {
		return nil, fmt.Errorf("synth: EXIF orientation %d outside [1, 8]", orientation)
	}
	if len(jpeg) < 4 || jpeg[0] != 0xff || jpeg[1] != 0xd8 {
		return nil, fmt.Errorf("synth: WithOrientation: not a JPEG")
	}

	var order binary.AppendByteOrder = binary.LittleEndian
	tiff := []byte("II")
	if bigEndian {
		order, tiff = binary.BigEndian, []byte("MM")
	}
	tiff = order.AppendUint16(tiff, 42)
	tiff = order.AppendUint32(tiff, 8) // IFD0 follows the header
	tiff = order.AppendUint16(tiff, 1) // one entry
	tiff = order.AppendUint16(tiff, 0x0112)
	tiff = order.AppendUint16(tiff, 3) // SHORT
	tiff = order.AppendUint32(tiff, 1) // one value, stored in the offset field
	tiff = order.AppendUint16(tiff, uint16(orientation))
	tiff = order.AppendUint16(tiff, 0) // padding to four bytes
	tiff = order.AppendUint32(tiff, 0) // no next IFD
	app1 := []byte{0xff, 0xe1, 0, 0}
	app1 = append(app1, "Exif\x00\x00"...)
	app1 = append(app1, tiff...)
	binary.BigEndian.PutUint16(app1[2:], uint16(len(app1)-2))

	out := make([]byte, 0, len(jpeg)+len(app1))
	out = append(out, 0xff, 0xd8)
	inserted := false
	for i := 2; ; {
		if i+4 > len(jpeg) || jpeg[i] != 0xff {
			return nil, fmt.Errorf("synth: WithOrientation: bad marker at offset %d", i)
		}
		m := jpeg[i+1]
		if m == 0xff { // fill byte
			i++
			continue
		}
		if m != 0xe0 && !inserted {
			out = append(out, app1...)
			inserted = true
		}
		if m == 0xda || m == 0xd9 { // the entropy-coded data starts (or the file ends)
			return append(out, jpeg[i:]...), nil
		}
		n := int(binary.BigEndian.Uint16(jpeg[i+2:]))
		if n < 2 || i+2+n > len(jpeg) {
			return nil, fmt.Errorf("synth: WithOrientation: bad segment length at offset %d", i)
		}
		seg := jpeg[i : i+2+n]
		if !(m == 0xe1 && bytes.HasPrefix(seg[4:], []byte("Exif\x00\x00"))) {
			out = append(out, seg...)
		}
		i += 2 + n
	}
}
