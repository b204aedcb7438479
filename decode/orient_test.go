package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/jpeg"
	"testing"
)

// orientRef applies EXIF orientation o pixel by pixel from its definition: where output
// pixel (x, y) comes from in a w×h source.
func orientRef(src *Image, o int) *Image {
	w, h := src.Width, src.Height
	from := map[int]func(x, y int) (int, int){
		1: func(x, y int) (int, int) { return x, y },
		2: func(x, y int) (int, int) { return w - 1 - x, y },
		3: func(x, y int) (int, int) { return w - 1 - x, h - 1 - y },
		4: func(x, y int) (int, int) { return x, h - 1 - y },
		5: func(x, y int) (int, int) { return y, x },
		6: func(x, y int) (int, int) { return y, h - 1 - x },
		7: func(x, y int) (int, int) { return w - 1 - y, h - 1 - x },
		8: func(x, y int) (int, int) { return w - 1 - y, x },
	}[o]
	out := &Image{}
	if o >= 5 {
		out.Reset(h, w)
	} else {
		out.Reset(w, h)
	}
	for y := 0; y < out.Height; y++ {
		for x := 0; x < out.Width; x++ {
			sx, sy := from(x, y)
			copy(out.Row(y)[3*x:3*x+3], src.Row(sy)[3*sx:3*sx+3])
		}
	}
	return out
}

func TestOrient(t *testing.T) {
	src := noiseImage(newRand(), 70, 45) // more than two tiles each way
	var got Image
	for o := 1; o <= 8; o++ {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			orient(&got, src, o)
			sameImage(t, &got, orientRef(src, o), 0)
		})
	}
}

// TestDecodeOrientation decodes the fixtures tagged 1..8 (identical pixels, different EXIF
// orientation) and checks them against the definition, and against PIL's exif_transpose
// of the same files within JPEG decoder differences.
func TestDecodeOrientation(t *testing.T) {
	d := goDecoder(t, Options{})
	base, err := d.Decode(nil, fixture(t, "orient-1.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	ignore := goDecoder(t, Options{IgnoreOrientation: true})
	for o := 1; o <= 8; o++ {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			data := fixture(t, fmt.Sprintf("orient-%d.jpg", o))
			got, err := d.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, got, orientRef(base, o), 0)
			// libjpeg and image/jpeg differ by a unit or two on these flat blocks.
			sameImage(t, got, fixtureRGB(t, fmt.Sprintf("orient-%d-pil.png", o)), 3)
			raw, err := ignore.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, raw, base, 0)
			cfg, err := ReadConfig(data)
			if err != nil || cfg.Orientation != o || cfg.Width != got.Width || cfg.Height != got.Height {
				t.Errorf("ReadConfig = %+v, %v; want orientation %d, %dx%d", cfg, err, o, got.Width, got.Height)
			}
		})
	}
}

// withEXIF inserts an APP1 Exif segment after the SOI of a JPEG. The orientation tag is
// written in the given byte order, as the first entry or after other entries.
func withEXIF(jpg []byte, order binary.ByteOrder, orientation, before int) []byte {
	var t bytes.Buffer
	if order == binary.LittleEndian {
		t.WriteString("II*\x00")
	} else {
		t.WriteString("MM\x00*")
	}
	binary.Write(&t, order, uint32(8))
	binary.Write(&t, order, uint16(before+1))
	for i := 0; i < before; i++ { // ImageDescription-like filler entries
		binary.Write(&t, order, []uint16{0x010e + uint16(i), 2, 0, 4})
		binary.Write(&t, order, uint32(0))
	}
	binary.Write(&t, order, []uint16{0x0112, 3})
	binary.Write(&t, order, uint32(1))
	binary.Write(&t, order, []uint16{uint16(orientation), 0})
	binary.Write(&t, order, uint32(0)) // no next IFD
	seg := append([]byte("Exif\x00\x00"), t.Bytes()...)
	app1 := append([]byte{0xff, 0xe1, byte((len(seg) + 2) >> 8), byte(len(seg) + 2)}, seg...)
	return append(append(append([]byte{}, jpg[:2]...), app1...), jpg[2:]...)
}

func TestEXIFParsing(t *testing.T) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, photo(20, 10), nil); err != nil {
		t.Fatal(err)
	}
	plain := b.Bytes()
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"none", plain, 1},
		{"little-endian", withEXIF(plain, binary.LittleEndian, 6, 0), 6},
		{"big-endian", withEXIF(plain, binary.BigEndian, 8, 0), 8},
		{"after-other-tags", withEXIF(plain, binary.LittleEndian, 5, 3), 5},
		{"out-of-range", withEXIF(plain, binary.BigEndian, 9, 0), 1},
		{"zero", withEXIF(plain, binary.BigEndian, 0, 0), 1},
		{"truncated-segment", withEXIF(plain, binary.LittleEndian, 3, 0)[:30], 1},
		{"bad-offset", bytes.Replace(withEXIF(plain, binary.LittleEndian, 3, 0), []byte("II*\x00\x08"), []byte("II*\x00\xf0"), 1), 1},
		// A count past the segment's end: the entries that are there are read.
		{"huge-count", bytes.Replace(withEXIF(plain, binary.BigEndian, 3, 2), []byte("MM\x00*\x00\x00\x00\x08\x00\x03"), []byte("MM\x00*\x00\x00\x00\x08\xff\xff"), 1), 3},
		{"huge-count-no-tag", bytes.Replace(withEXIF(plain, binary.BigEndian, 3, 2), []byte("\x01\x12\x00\x03"), []byte("\x01\x13\x00\x03"), 1), 1},
		{"not-exif-app1", bytes.Replace(withEXIF(plain, binary.LittleEndian, 3, 0), []byte("Exif"), []byte("Exig"), 1), 1},
		{"segment-overruns", []byte("\xff\xd8\xff\xe1\xff\xffExif\x00\x00II*\x00"), 1},
		{"fill-bytes", append([]byte("\xff\xd8\xff"), withEXIF(plain, binary.LittleEndian, 7, 0)[2:]...), 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jpegOrientation(tc.data); got != tc.want {
				t.Errorf("orientation %d, want %d", got, tc.want)
			}
		})
	}
	// The decoder applies it: a 20×10 image tagged 6 comes out 10×20.
	m, err := goDecoder(t, Options{}).Decode(nil, withEXIF(plain, binary.LittleEndian, 6, 0))
	if err != nil || m.Width != 10 || m.Height != 20 {
		t.Fatalf("Decode: %v, %dx%d", err, m.Width, m.Height)
	}
}

// TestOrientThenResize checks that resizing on the stored axes and then orienting (what
// Decode does) gives the size and, within ±2, the pixels of orienting first: ±1 from
// resampling before orienting, ±1 more because these (4:4:4) JPEGs are resampled plane by
// plane and converted to RGB after, which rounds differently near a clamped channel.
func TestOrientThenResize(t *testing.T) {
	d := goDecoder(t, Options{Resize: ResizePolicy{Mode: ResizeShorter, Size: 30}})
	full := goDecoder(t, Options{})
	for _, o := range []int{1, 3, 6, 7} {
		data := fixture(t, fmt.Sprintf("orient-%d.jpg", o))
		got, err := d.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		oriented, err := full.Decode(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		w, h := d.opts.Resize.OutputSize(oriented.Width, oriented.Height)
		want := resizeRef(&Image{}, oriented, image.Rect(0, 0, oriented.Width, oriented.Height), w, h)
		sameImage(t, got, want, 2)
	}
}
