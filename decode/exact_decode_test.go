package decode

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	"image/png"
	"testing"
)

// TestDecodeExact: with Options.Exact, Decode's resize and DecodeRegion equal a full
// decode followed by Resizer.Exact (which TestResizeExactPillow ties to Pillow), on both
// backends, with and without an EXIF rotation.
func TestDecodeExact(t *testing.T) {
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, photo(333, 251), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	plain := jb.Bytes()
	files := map[string][]byte{"plain": plain, "orient-6": withEXIF(plain, binary.BigEndian, 6, 0)}
	for _, backend := range []string{BackendGo, BackendTurbo} {
		for name, data := range files {
			var exact, full *Decoder
			if backend == BackendTurbo {
				exact, full = turboDecoder(t, Options{Exact: true, Resize: ResizePolicy{Mode: ResizeShorter, Size: 100}}), turboDecoder(t, Options{Exact: true})
			} else {
				exact, full = goDecoder(t, Options{Exact: true, Resize: ResizePolicy{Mode: ResizeShorter, Size: 100}}), goDecoder(t, Options{Exact: true})
			}
			whole, err := full.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			z := Resizer{Exact: true}
			check := func(label string, got *Image, r image.Rectangle, w, h int) {
				want, err := z.Resize(&Image{}, whole, r, w, h)
				if err != nil {
					t.Fatal(err)
				}
				if got.Width != w || got.Height != h || !bytes.Equal(got.Pix, want.Pix) {
					t.Errorf("%s/%s/%s: differs from a full decode resized with Resizer.Exact", backend, name, label)
				}
			}
			got, err := exact.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			w, h := ResizePolicy{Mode: ResizeShorter, Size: 100}.OutputSize(whole.Width, whole.Height)
			check("Decode", got, image.Rect(0, 0, whole.Width, whole.Height), w, h)
			r := image.Rect(17, 9, 17+101, 9+77)
			got, err = exact.DecodeRegion(nil, data, r, 64, 48)
			if err != nil {
				t.Fatal(err)
			}
			check("DecodeRegion", got, r, 64, 48)
		}
	}
}

// TestDecodeExactGray16: PIL opens a 16-bit grey PNG in mode I and its convert('RGB')
// clamps each level to 255; Exact does the same, the default keeps the high byte.
func TestDecodeExactGray16(t *testing.T) {
	g := image.NewGray16(image.Rect(0, 0, 4, 1))
	levels := []uint16{0, 200, 255, 256}
	for i, v := range levels {
		g.Pix[2*i], g.Pix[2*i+1] = uint8(v>>8), uint8(v)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, g); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		exact bool
		want  []uint8
	}{{true, []uint8{0, 200, 255, 255}}, {false, []uint8{0, 0, 0, 1}}} {
		m, err := goDecoder(t, Options{Exact: c.exact}).Decode(nil, b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range c.want {
			if p := m.Pix[3*i : 3*i+3]; p[0] != v || p[1] != v || p[2] != v {
				t.Errorf("Exact %t: level %d -> %v, want %d", c.exact, levels[i], p, v)
			}
		}
	}
}
