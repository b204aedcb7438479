package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestDecodeRowsMatchesDecode decodes every range of rows of s2 and raw records, with
// bands stored compressed (posterised pixels), as is (noise) and both, in sizes whose last
// band is short, one row a band, and one band: the rows are the whole image's, and only
// the bands holding them are decoded.
func TestDecodeRowsMatchesDecode(t *testing.T) {
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	sh := &shard{name: "test"}
	for _, tc := range []struct {
		w, h  int
		noisy bool
	}{
		{341, 256, false}, {341, 256, true}, {7, 3, false}, {6000, 5, true}, {1, 1, false}, {683, 50, false},
	} {
		for _, codec := range []Codec{S2, Raw, Zstd} {
			t.Run(fmt.Sprintf("%s/%dx%d/noisy=%v", codec, tc.w, tc.h, tc.noisy), func(t *testing.T) {
				want := testImage(uint64(tc.w), tc.w, tc.h, tc.noisy)
				if !tc.noisy {
					posterise(want)
				}
				if tc.w == 683 { // noise in the middle rows only: compressed and stored bands mixed
					noise := testImage(2, tc.w, tc.h, true)
					copy(want.Pix[3*tc.w*20:3*tc.w*30], noise.Pix[3*tc.w*20:])
				}
				payload, err := d.encode(nil, codec, &decode.Image{Pix: append([]byte(nil), want.Pix...), Width: tc.w, Height: tc.h, Stride: 3 * tc.w})
				if err != nil {
					t.Fatal(err)
				}
				if codec == S2 {
					raw, packed := bandKinds(t, payload, tc.w, tc.h)
					t.Logf("%d bytes for %d: %d bands as is, %d compressed", len(payload), len(want.Pix), raw, packed)
					if tc.noisy && packed > 0 || !tc.noisy && tc.w != 683 && tc.w > 1 && raw > 0 || tc.w == 683 && (raw == 0 || packed == 0) {
						t.Errorf("%d bands stored as is, %d compressed", raw, packed)
					}
				}
				r := Ref{Path: "x.jpg", Codec: codec, Width: uint32(tc.w), Height: uint32(tc.h), sh: sh}
				rows := bandRows(tc.w)
				step := max(1, tc.h/23)
				for y0 := 0; y0 <= tc.h; y0 += step {
					for y1 := y0; y1 <= tc.h; y1 += step {
						img, top, err := d.DecodeRows(nil, r, payload, y0, y1)
						if err != nil {
							t.Fatalf("rows %d to %d: %v", y0, y1, err)
						}
						if y0 < y1 && (top > y0 || top+img.Height < y1) || img.Width != tc.w {
							t.Fatalf("rows %d to %d: %dx%d from row %d", y0, y1, img.Width, img.Height, top)
						}
						// The bands holding the rows, no more.
						if wantTop, wantH := y0/rows*rows, min((y1+rows-1)/rows*rows, tc.h)-y0/rows*rows; codec == S2 && y1 > y0 && (top != wantTop || img.Height != wantH) {
							t.Fatalf("rows %d to %d: %d rows from %d, want %d from %d", y0, y1, img.Height, top, wantH, wantTop)
						}
						for y := max(y0, top); y < min(y1, top+img.Height); y++ {
							if got := string(img.Row(y - top)); got != string(want.Row(y)) {
								t.Fatalf("rows %d to %d: row %d differs", y0, y1, y)
							}
						}
					}
				}
			})
		}
	}
}

// posterise keeps the top three bits of every sample, making runs that s2 compresses,
// as photos' flat skies and backgrounds do; plain waves change a little every pixel,
// and s2 leaves them as they are.
func posterise(img *decode.Image) {
	for i := range img.Pix {
		img.Pix[i] &= 0xe0
	}
}

// bandKinds counts the bands of an s2 payload stored as is and compressed.
func bandKinds(t *testing.T, payload []byte, w, h int) (raw, packed int) {
	t.Helper()
	rows := int(binary.LittleEndian.Uint32(payload))
	for b := range (h + rows - 1) / rows {
		if binary.LittleEndian.Uint32(payload[4+4*b:])&bandRaw != 0 {
			raw++
		} else {
			packed++
		}
	}
	return raw, packed
}

// TestDecodeBandsRejects damages the band table and the bands of an s2 payload: each
// read of rows is ErrCorrupt, naming the record and what is wrong, and reads no further
// than the payload.
func TestDecodeBandsRejects(t *testing.T) {
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	const w, h = 100, 120 // 54 rows a band: 3 bands
	flat := testImage(1, w, h, false)
	posterise(flat)
	smooth, err := d.encode(nil, S2, flat)
	if err != nil {
		t.Fatal(err)
	}
	noisy, err := d.encode(nil, S2, testImage(1, w, h, true))
	if err != nil {
		t.Fatal(err)
	}
	if r, p := bandKinds(t, smooth, w, h); r != 0 || p != 3 {
		t.Fatalf("smooth: %d bands as is, %d compressed; want 0, 3", r, p)
	}
	if r, p := bandKinds(t, noisy, w, h); r != 3 || p != 0 {
		t.Fatalf("noisy: %d bands as is, %d compressed; want 3, 0", r, p)
	}
	edit := func(p []byte, f func(p []byte) []byte) []byte { return f(append([]byte(nil), p...)) }
	word := func(p []byte, b int) uint32 { return binary.LittleEndian.Uint32(p[4+4*b:]) }
	setWord := func(b int, v func(uint32) uint32) func([]byte) []byte {
		return func(p []byte) []byte {
			binary.LittleEndian.PutUint32(p[4+4*b:], v(word(p, b)))
			return p
		}
	}
	sh := &shard{name: "test"}
	for _, tc := range []struct {
		name    string
		payload []byte
		y0, y1  int
		why     string
	}{
		{"no table", smooth[:3], 0, h, "no band table"},
		{"table cut short", smooth[:10], 0, 1, "table of 3 bands"},
		{"other rows per band", edit(smooth, setWord(-1, func(uint32) uint32 { return 53 })), 0, 1, "53 rows per band"},
		{"band past the end", edit(smooth, setWord(1, func(v uint32) uint32 { return v + 1 })), 0, 1, "past the payload's end"},
		{"bytes after the last band", append(append([]byte(nil), smooth...), 0), 0, 1, "after the last band"},
		{"band of another size", edit(smooth, setWord(0, func(v uint32) uint32 { return v - 1 })), 0, 1, "band 0"},
		{"stored band flagged compressed", edit(noisy, setWord(2, func(v uint32) uint32 { return v &^ bandRaw })), 110, 111, "band 2"},
		{"compressed band flagged stored", edit(smooth, setWord(1, func(v uint32) uint32 { return v | bandRaw })), 60, 61, "band 1: "},
		{"damaged band", edit(smooth, func(p []byte) []byte { p[4+12+2] ^= 0xff; return p }), 0, 1, "band 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Ref{Path: "a/b.jpg", Codec: S2, Width: w, Height: h, sh: sh}
			_, _, err := d.DecodeRows(nil, r, tc.payload, tc.y0, tc.y1)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a/b.jpg") || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("DecodeRows = %v; want ErrCorrupt naming a/b.jpg and %q", err, tc.why)
			}
		})
	}
	// Rows outside the record are the caller's mistake, not a damaged record.
	r := Ref{Path: "a/b.jpg", Codec: S2, Width: w, Height: h, sh: sh}
	if _, _, err := d.DecodeRows(nil, r, smooth, 5, h+1); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("rows 5 to %d of %d: %v", h+1, h, err)
	}
}
