// Package jpegseg walks the marker segments of a JPEG file. It is the one marker
// walker of the module: the decode package's header reader (frame size, EXIF
// orientation) and pure-Go JPEG decoder, and internal/turbojpeg's size check, all read
// markers through it, so the syntax of markers, fill bytes and segment lengths is
// decided in one place. What a walk does at a marker it does not expect (a stuffed
// zero, TEM, a second SOI) is the caller's policy: a Walker reports such markers
// rather than guessing, and each caller decides whether to go on, give up or leave the
// file to another decoder.
//
// A Walker reads untrusted data: every index is checked, every step advances, and it
// never allocates.
package jpegseg

import "errors"

// Marker codes (the byte after 0xff) the callers name.
const (
	TEM   = 0x01 // temporary use in arithmetic coding; no length
	SOF0  = 0xc0 // baseline sequential frame
	SOF1  = 0xc1 // extended sequential frame
	SOF2  = 0xc2 // progressive frame
	DHT   = 0xc4
	DAC   = 0xcc
	RST0  = 0xd0 // RST0 to RST7 (0xd0 to 0xd7): no length
	RST7  = 0xd7
	SOI   = 0xd8 // no length
	EOI   = 0xd9 // no length
	SOS   = 0xda // start of scan: entropy-coded data follows its segment
	DQT   = 0xdb
	DNL   = 0xdc
	DRI   = 0xdd
	APP0  = 0xe0 // APP0 to APP15 (0xe0 to 0xef)
	APP1  = 0xe1
	APP14 = 0xee
	APP15 = 0xef
	COM   = 0xfe
)

// Errors of Walker.Next.
var (
	// ErrEnd: the data ends before the next marker's code.
	ErrEnd = errors.New("jpegseg: no marker before the end of data")
	// ErrNotMarker: a strict walk found a byte other than 0xff where a marker must be.
	ErrNotMarker = errors.New("jpegseg: extraneous bytes where a marker must be")
	// ErrShortSegment: a segment's length is below 2 or runs past the end of data.
	ErrShortSegment = errors.New("jpegseg: marker segment runs past the end of data")
)

// IsSOF reports whether marker starts a frame header: 0xc0 to 0xcf except DHT (0xc4),
// JPG (0xc8) and DAC (0xcc).
func IsSOF(marker byte) bool {
	return marker >= 0xc0 && marker <= 0xcf && marker != DHT && marker != 0xc8 && marker != DAC
}

// Standalone reports whether a marker has no length and no segment body: TEM, RST0 to
// RST7, SOI, EOI, and the stuffed zero 0x00 (0xff 0x00, which is no marker at all).
func Standalone(marker byte) bool {
	return marker == 0x00 || marker == TEM || marker >= RST0 && marker <= EOI
}

// Segment is one marker a Walker found.
type Segment struct {
	Marker byte   // the code after 0xff (and any fill bytes)
	Body   []byte // the segment after its length field; nil for a Standalone marker
	Fill   bool   // 0xff fill bytes came between the marker's 0xff and its code
	// Skipped counts the bytes a lax walk passed over before the marker: bytes other
	// than 0xff, and stuffed zeros (0xff 0x00) not preceded by fill bytes.
	Skipped int
}

// Walker walks a JPEG's markers from Pos. Set Data and Pos (2, just after SOI, for a
// whole file; a decoder resumes after entropy-coded data) and call Next.
type Walker struct {
	Data []byte
	Pos  int // the next byte to read; Next moves it past the marker's segment
	// Lax makes Next skip what is not a marker where one must be, as libjpeg's
	// next_marker and image/jpeg do: bytes other than 0xff, and 0xff 0x00 (image/jpeg
	// treats a stuffed zero there as extraneous data). A strict walk fails at such a
	// byte with ErrNotMarker and reports 0xff 0x00 as marker 0x00.
	Lax bool
}

// Next returns the marker at Pos (a lax walk: the next one at or after Pos) and its
// segment, and moves Pos past it. Fill bytes (extra 0xff before the code) are skipped.
// A Standalone marker has no body; any other marker's two-byte length is read, and its
// body must lie within Data. On error Pos is unspecified.
func (w *Walker) Next() (Segment, error) {
	var s Segment
	data := w.Data
	for {
		if w.Lax {
			for w.Pos < len(data) && data[w.Pos] != 0xff {
				w.Pos++
				s.Skipped++
			}
		}
		if w.Pos >= len(data) {
			return s, ErrEnd
		}
		if data[w.Pos] != 0xff {
			return s, ErrNotMarker
		}
		fill := false
		for w.Pos+1 < len(data) && data[w.Pos+1] == 0xff {
			w.Pos++
			fill = true
		}
		if w.Pos+1 >= len(data) {
			return s, ErrEnd
		}
		s.Marker, s.Fill = data[w.Pos+1], fill
		w.Pos += 2
		if s.Marker == 0x00 && !fill && w.Lax {
			s.Skipped += 2
			continue // a stuffed zero where a marker must be: extraneous data
		}
		if Standalone(s.Marker) {
			return s, nil
		}
		if w.Pos+2 > len(data) {
			return s, ErrShortSegment
		}
		n := int(data[w.Pos])<<8 | int(data[w.Pos+1])
		if n < 2 || w.Pos+n > len(data) {
			return s, ErrShortSegment
		}
		s.Body = data[w.Pos+2 : w.Pos+n]
		w.Pos += n
		return s, nil
	}
}
