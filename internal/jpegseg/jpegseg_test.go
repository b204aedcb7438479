package jpegseg

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"
)

// encoded returns a small JPEG from image/jpeg: SOI, DQT, SOF0, DHT, SOS, data, EOI.
func encoded(t testing.TB) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 9, 5)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// walk returns the segments of a walk from pos until the first error, and that error.
func walk(data []byte, pos int, lax bool) ([]Segment, error) {
	w := Walker{Data: data, Pos: pos, Lax: lax}
	var segs []Segment
	for {
		s, err := w.Next()
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		if s.Marker == SOS || s.Marker == EOI {
			return segs, nil
		}
	}
}

func markers(segs []Segment) []byte {
	var m []byte
	for _, s := range segs {
		m = append(m, s.Marker)
	}
	return m
}

func TestNormalFile(t *testing.T) {
	data := encoded(t)
	for _, lax := range []bool{false, true} {
		segs, err := walk(data, 2, lax)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := markers(segs), []byte{DQT, SOF0, DHT, SOS}; !bytes.Equal(got, want) {
			t.Fatalf("lax %v: markers % x, want % x", lax, got, want)
		}
		sof := segs[1].Body
		if len(sof) != 6+3 || sof[0] != 8 || int(sof[1])<<8|int(sof[2]) != 5 || int(sof[3])<<8|int(sof[4]) != 9 {
			t.Errorf("lax %v: SOF body % x", lax, sof)
		}
		for _, s := range segs {
			if s.Fill || s.Skipped != 0 {
				t.Errorf("lax %v: marker %#x: fill %v, skipped %d", lax, s.Marker, s.Fill, s.Skipped)
			}
		}
	}
	// Resuming after the scan's data: a lax walk finds EOI past the entropy-coded bytes.
	w := Walker{Data: data, Pos: 2}
	for {
		s, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if s.Marker == SOS {
			break
		}
	}
	w.Lax = true
	s, err := w.Next()
	if err != nil || s.Marker != EOI || s.Body != nil || s.Skipped == 0 || w.Pos != len(data) {
		t.Errorf("after the scan: %+v, %v, pos %d of %d", s, err, w.Pos, len(data))
	}
}

func TestMarkers(t *testing.T) {
	app1 := []byte{0xff, APP1, 0, 5, 'a', 'b', 'c'}
	for _, tc := range []struct {
		name    string
		data    []byte
		lax     bool
		marker  byte
		body    string
		fill    bool
		skipped int
		err     error
	}{
		{name: "segment", data: app1, marker: APP1, body: "abc"},
		{name: "empty body", data: []byte{0xff, COM, 0, 2}, marker: COM, body: ""},
		{name: "fill bytes", data: append([]byte{0xff, 0xff, 0xff}, app1[1:]...), marker: APP1, body: "abc", fill: true},
		{name: "fill bytes lax", lax: true, data: append([]byte{0xff, 0xff}, app1[1:]...), marker: APP1, body: "abc", fill: true},
		{name: "restart", data: []byte{0xff, 0xd3, 0xff}, marker: 0xd3},
		{name: "TEM", data: []byte{0xff, TEM, 0, 5}, marker: TEM},
		{name: "TEM lax", lax: true, data: []byte{0xff, TEM, 0, 5}, marker: TEM},
		{name: "SOI", data: []byte{0xff, SOI, 0xff}, marker: SOI},
		{name: "SOI lax", lax: true, data: []byte{0xff, SOI}, marker: SOI},
		{name: "EOI", data: []byte{0xff, EOI}, marker: EOI},
		// A stuffed zero: a strict walk reports it (its callers give up), a lax one
		// skips it as image/jpeg does, unless fill bytes came first.
		{name: "FF00", data: append([]byte{0xff, 0x00}, app1...), marker: 0x00},
		{name: "FF00 lax", lax: true, data: append([]byte{0xff, 0x00}, app1...), marker: APP1, body: "abc", skipped: 2},
		{name: "FFFF00 lax", lax: true, data: append([]byte{0xff, 0xff, 0x00}, app1...), marker: 0x00, fill: true},
		{name: "FFFF00", data: append([]byte{0xff, 0xff, 0x00}, app1...), marker: 0x00, fill: true},
		{name: "stray bytes", data: append([]byte{1, 2, 3}, app1...), err: ErrNotMarker},
		{name: "stray bytes lax", lax: true, data: append([]byte{1, 2, 3}, app1...), marker: APP1, body: "abc", skipped: 3},
		{name: "stray and FF00 lax", lax: true, data: append([]byte{7, 0xff, 0, 9}, app1...), marker: APP1, body: "abc", skipped: 4},
		{name: "empty", data: nil, err: ErrEnd},
		{name: "lone FF", data: []byte{0xff}, err: ErrEnd},
		{name: "fill to the end", data: []byte{0xff, 0xff, 0xff}, err: ErrEnd},
		{name: "stray to the end lax", lax: true, data: []byte{1, 2, 0xff}, err: ErrEnd},
		{name: "no length", data: []byte{0xff, APP1, 0}, err: ErrShortSegment},
		{name: "length past the end", data: app1[:6], err: ErrShortSegment},
		{name: "length below 2", data: []byte{0xff, APP1, 0, 1, 0}, err: ErrShortSegment},
		{name: "SOS truncated", data: []byte{0xff, SOS, 0, 12, 1}, err: ErrShortSegment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Walker{Data: tc.data, Lax: tc.lax}
			s, err := w.Next()
			if err != tc.err {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if s.Marker != tc.marker || string(s.Body) != tc.body || s.Fill != tc.fill || s.Skipped != tc.skipped {
				t.Fatalf("got marker %#x body %q fill %v skipped %d; want %#x %q %v %d",
					s.Marker, s.Body, s.Fill, s.Skipped, tc.marker, tc.body, tc.fill, tc.skipped)
			}
			if Standalone(s.Marker) != (s.Body == nil) {
				t.Errorf("marker %#x: body %v", s.Marker, s.Body)
			}
			if s.Marker == APP1 && w.Pos != len(tc.data) { // app1 ends every such case
				t.Errorf("pos %d after the segment, data %d bytes", w.Pos, len(tc.data))
			}
		})
	}
}

func TestIsSOF(t *testing.T) {
	var got []byte
	for m := 0; m < 256; m++ {
		if IsSOF(byte(m)) {
			got = append(got, byte(m))
		}
	}
	want := []byte{0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf}
	if !bytes.Equal(got, want) {
		t.Errorf("frame markers % x, want % x", got, want)
	}
}

func TestNoAllocs(t *testing.T) {
	data := encoded(t)
	n := testing.AllocsPerRun(20, func() {
		w := Walker{Data: data, Pos: 2}
		for {
			if s, err := w.Next(); err != nil || s.Marker == SOS {
				break
			}
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per walk", n)
	}
}

// FuzzWalker checks that a walk never panics, always advances, and returns bodies
// inside the data.
func FuzzWalker(f *testing.F) {
	f.Add(encoded(f), false)
	f.Add([]byte{0xff, 0xd8, 0xff, 0xff, 0x00, 0xff, 0xe1, 0, 2}, true)
	f.Fuzz(func(t *testing.T, data []byte, lax bool) {
		w := Walker{Data: data, Lax: lax}
		for {
			pos := w.Pos
			s, err := w.Next()
			if err != nil {
				return
			}
			if w.Pos <= pos || w.Pos > len(data) {
				t.Fatalf("pos %d -> %d of %d", pos, w.Pos, len(data))
			}
			// A body ends where the walk resumes, after its marker and length.
			if n := len(s.Body); n > 0 && (w.Pos-pos < n+4 || &s.Body[0] != &data[w.Pos-n]) {
				t.Fatalf("%d-byte body of marker %#x is not the %d bytes before pos %d", n, s.Marker, n, w.Pos)
			}
		}
	})
}
