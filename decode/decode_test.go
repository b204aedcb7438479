package decode

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// goDecoder returns a Decoder on the pure-Go backend with options o.
func goDecoder(t testing.TB, o Options) *Decoder {
	t.Helper()
	o.Backend = BackendGo
	d, err := NewDecoder(&o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// encoded is a test image in some format, and what its pixels must decode to.
type encoded struct {
	name   string
	format string
	data   []byte
	want   *Image // nil: image.Decode of data, converted by refRGB
	tol    int
}

// generated returns images the standard encoders can write, covering the pixel types the
// decoders produce.
func generated(t testing.TB) []encoded {
	t.Helper()
	const w, h = 31, 17 // odd sizes exercise the chroma edges
	src := photo(w, h)
	enc := func(f func(*bytes.Buffer) error) []byte {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	// Non-premultiplied alpha, including fully transparent pixels with a colour.
	nrgba := image.NewNRGBA(src.Rect)
	for i := 0; i < w*h; i++ {
		copy(nrgba.Pix[4*i:4*i+3], src.Pix[4*i:4*i+3])
		nrgba.Pix[4*i+3] = uint8(i * 37)
	}
	premul := image.NewRGBA(src.Rect)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			premul.Set(x, y, nrgba.At(x, y))
		}
	}
	n64 := image.NewNRGBA64(src.Rect)
	g16 := image.NewGray16(src.Rect)
	gray := image.NewGray(src.Rect)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := nrgba.NRGBAAt(x, y)
			n64.SetNRGBA64(x, y, color.NRGBA64{uint16(c.R)*257 + 3, uint16(c.G) * 251, uint16(c.B) * 13, uint16(c.A) * 257})
			g16.SetGray16(x, y, color.Gray16{uint16(x*2000 + y*17)})
			gray.SetGray(x, y, color.Gray{uint8(x*8 + y)})
		}
	}
	pal := image.NewPaletted(src.Rect, color.Palette{
		color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}, color.NRGBA{10, 20, 250, 0}, color.NRGBA{90, 80, 70, 128},
	})
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i % 4)
	}
	// PIL semantics: the RGB of an RGBA image, whatever the alpha.
	nrgbaRGB := refRGB(nrgba)
	return []encoded{
		{name: "png-rgb", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, src) })},
		{name: "png-alpha", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, nrgba) }), want: nrgbaRGB},
		{name: "png-16bit-alpha", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, n64) })},
		{name: "png-gray", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, gray) })},
		{name: "png-gray16", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, g16) })},
		{name: "png-palette-trns", format: PNG, data: enc(func(b *bytes.Buffer) error { return png.Encode(b, pal) })},
		{name: "gif", format: GIF, data: enc(func(b *bytes.Buffer) error { return gif.Encode(b, src, nil) })},
		// Sequential JPEGs go through the decoder's own path, whose inverse DCT is
		// libjpeg's and differs from image/jpeg's by at most 1 per plane sample.
		{name: "jpeg-420", format: JPEG, tol: 2, data: enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 90}) })},
		{name: "jpeg-gray", format: JPEG, tol: 1, data: enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, nil) })},
		{name: "bmp-rgb", format: BMP, data: enc(func(b *bytes.Buffer) error { return bmp.Encode(b, src) })},
		{name: "bmp-alpha", format: BMP, data: enc(func(b *bytes.Buffer) error { return bmp.Encode(b, nrgba) })},
		{name: "bmp-gray", format: BMP, data: enc(func(b *bytes.Buffer) error { return bmp.Encode(b, gray) })},
		{name: "tiff-rgb", format: TIFF, data: enc(func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) })},
		{name: "tiff-alpha-deflate", format: TIFF, data: enc(func(b *bytes.Buffer) error {
			return tiff.Encode(b, nrgba, &tiff.Options{Compression: tiff.Deflate})
		}), want: nrgbaRGB},
		// Associated (premultiplied) alpha decodes to *image.RGBA and is un-premultiplied.
		{name: "tiff-premultiplied", format: TIFF, data: enc(func(b *bytes.Buffer) error { return tiff.Encode(b, premul, nil) })},
		{name: "tiff-16bit", format: TIFF, data: enc(func(b *bytes.Buffer) error { return tiff.Encode(b, n64, nil) })},
		{name: "tiff-gray16", format: TIFF, data: enc(func(b *bytes.Buffer) error { return tiff.Encode(b, g16, nil) })},
		{name: "tiff-paletted", format: TIFF, data: enc(func(b *bytes.Buffer) error { return tiff.Encode(b, pal, nil) })},
	}
}

// fixtureCases are the committed fixtures with known decodings.
func fixtureCases(t testing.TB) []encoded {
	gradient := fixtureRGB(t, "gradient.png")
	return []encoded{
		{name: "progressive.jpg", format: JPEG, data: fixture(t, "progressive.jpg")},
		{name: "cmyk.jpg", format: JPEG, data: fixture(t, "cmyk.jpg")},
		{name: "jpeg-named.png", format: JPEG, tol: 2, data: fixture(t, "jpeg-named.png")},
		// Limited-range BT.601 with libwebp's chroma upsampling, exactly as PIL decodes it.
		{name: "lossy.webp", format: WebP, data: fixture(t, "lossy.webp"), want: fixtureRGB(t, "lossy-webp-pil.png")},
		{name: "lossless.webp", format: WebP, data: fixture(t, "lossless.webp"), want: gradient},
		{name: "lossy-alpha.webp", format: WebP, data: fixture(t, "lossy-alpha.webp"), want: fixtureRGB(t, "lossy-alpha-webp-pil.png")},
		// Made with cwebp -exact: the RGB under transparent pixels survives, and PIL's
		// convert('RGB') keeps it.
		{name: "lossless-alpha.webp", format: WebP, data: fixture(t, "lossless-alpha.webp"), want: fixtureRGB(t, "gradient-alpha.png")},
		// PIL's convert('RGB') keeps the transparent index's palette colour.
		{name: "transparent.gif", format: GIF, data: fixture(t, "transparent.gif"), want: fixtureRGB(t, "transparent-gif-pil.png")},
	}
}

// TestDecodeFormats decodes every format and pixel type and compares with image.Decode
// plus a per-pixel conversion (or a known answer).
func TestDecodeFormats(t *testing.T) {
	d := goDecoder(t, Options{})
	var dst Image
	for _, tc := range append(generated(t), fixtureCases(t)...) {
		t.Run(tc.name, func(t *testing.T) {
			if f := Sniff(tc.data); f != tc.format {
				t.Fatalf("Sniff = %q, want %q", f, tc.format)
			}
			want, tol := tc.want, tc.tol
			if want == nil {
				m, f, err := image.Decode(bytes.NewReader(tc.data))
				if err != nil || f != tc.format {
					t.Fatalf("image.Decode: %q, %v", f, err)
				}
				want = refRGB(m)
				if y, ok := m.(*image.YCbCr); ok && f == JPEG {
					// Chroma upsampled as libjpeg does; the reference rounds to
					// nearest where libjpeg biases, a level of chroma, 2 of RGB.
					want = refFancyRGB(y)
					tol += 2
				}
			}
			got, err := d.Decode(&dst, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got != &dst {
				t.Fatal("Decode did not return dst")
			}
			sameImage(t, got, want, tol)
			cfg, err := ReadConfig(tc.data)
			if err != nil || cfg.Format != tc.format || cfg.Width != want.Width || cfg.Height != want.Height || cfg.Orientation != 1 {
				t.Fatalf("ReadConfig = %+v, %v", cfg, err)
			}
		})
	}
}

// TestDecodeLossy checks the lossy fixtures against the image they were made from.
func TestDecodeLossy(t *testing.T) {
	d := goDecoder(t, Options{})
	src := fixtureRGB(t, "gradient.png")
	for _, name := range []string{"progressive.jpg", "cmyk.jpg", "jpeg-named.png", "lossy.webp", "lossy-alpha.webp"} {
		t.Run(name, func(t *testing.T) {
			m, err := d.Decode(nil, fixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			want := src
			if strings.Contains(name, "alpha") {
				want = fixtureRGB(t, "gradient-alpha.png")
			}
			if mean, psnr := stats(m, want); mean > 3 || psnr < 35 {
				t.Errorf("mean abs error %.2f, PSNR %.1f dB against the source", mean, psnr)
			}
		})
	}
}

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		data string
		want string
	}{
		{"\xff\xd8\xff\xe0", JPEG},
		{"\x89PNG\r\n\x1a\n", PNG},
		{"GIF87a", GIF},
		{"GIF89a", GIF},
		{"II*\x00", TIFF},
		{"MM\x00*", TIFF},
		{"RIFF\x00\x00\x00\x00WEBP", WebP},
		{"RIFF\x00\x00\x00\x00WAVE", ""},
		{"BM\x10\x00\x00\x00\x00\x00\x00\x00", BMP},
		{"BM and then some text", ""},
		{"\xff\xd8", ""},
		{"GIF88a", ""},
		{"", ""},
		{"<html>", ""},
	} {
		if got := Sniff([]byte(tc.data)); got != tc.want {
			t.Errorf("Sniff(%q) = %q, want %q", tc.data, got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	d := goDecoder(t, Options{})
	for _, tc := range []struct {
		name     string
		data     []byte
		sentinel error  // errors.Is
		format   string // *FormatError
	}{
		{"empty.bin", fixture(t, "empty.bin"), ErrUnsupported, ""},
		{"text.txt", fixture(t, "text.txt"), ErrUnsupported, ""},
		{"huge.png", fixture(t, "huge.png"), ErrTooLarge, ""},
		{"huge.jpg", fixture(t, "huge.jpg"), ErrTooLarge, ""},
		{"truncated.jpg", fixture(t, "truncated.jpg"), nil, JPEG},
		{"truncated.png", fixture(t, "truncated.png"), nil, PNG},
		{"corrupt.jpg", fixture(t, "corrupt.jpg"), nil, JPEG},
		{"corrupt.png", fixture(t, "corrupt.png"), nil, PNG},
		{"signature-only.gif", []byte("GIF89a"), nil, GIF},
		{"riff-no-frame.webp", []byte("RIFF\x04\x00\x00\x00WEBP"), nil, WebP},
		{"arithmetic.jpg", []byte("\xff\xd8\xff\xc9\x00\x0b\x08\x00\x10\x00\x10\x01\x01\x11\x00"), ErrUnsupported, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Decode(nil, tc.data)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "decode: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			var fe *FormatError
			switch {
			case tc.sentinel != nil && !errors.Is(err, tc.sentinel):
				t.Errorf("error %q is not %v", err, tc.sentinel)
			case tc.format != "" && (!errors.As(err, &fe) || fe.Format != tc.format || fe.Err == nil):
				t.Errorf("error %q (%T) is not a %s *FormatError", err, err, tc.format)
			}
			if _, cerr := ReadConfig(tc.data); cerr == nil && tc.sentinel == ErrUnsupported {
				t.Errorf("ReadConfig accepted it")
			}
			t.Log(err)
		})
	}
}

// TestTooLargeAllocatesNothing checks that a header claiming 100000×100000 fails before
// any pixel memory is allocated.
func TestTooLargeAllocatesNothing(t *testing.T) {
	d := goDecoder(t, Options{})
	for _, name := range []string{"huge.png", "huge.jpg"} {
		data := fixture(t, name)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := d.Decode(nil, data)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: %v", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: allocated %d bytes before failing", name, n)
		}
	}
	// The limit is configurable, and compared as int64.
	small := goDecoder(t, Options{MaxPixels: 31*17 - 1})
	if _, err := small.Decode(nil, generated(t)[0].data); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxPixels one below the size: %v", err)
	}
	exact := goDecoder(t, Options{MaxPixels: 31 * 17})
	if _, err := exact.Decode(nil, generated(t)[0].data); err != nil {
		t.Errorf("MaxPixels equal to the size: %v", err)
	}
}

// TestGIFFrameOffset decodes a GIF whose first frame covers part of the logical screen.
func TestGIFFrameOffset(t *testing.T) {
	frame := image.NewPaletted(image.Rect(3, 2, 8, 6), color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{250, 10, 20, 255}})
	for i := range frame.Pix {
		frame.Pix[i] = 1
	}
	var b bytes.Buffer
	err := gif.EncodeAll(&b, &gif.GIF{
		Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: frame.Palette, Width: 10, Height: 8},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := goDecoder(t, Options{}).Decode(nil, b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if m.Width != 10 || m.Height != 8 {
		t.Fatalf("size %dx%d, want the logical screen 10x8", m.Width, m.Height)
	}
	for y := 0; y < 8; y++ {
		for x := 0; x < 10; x++ {
			want := [3]uint8{}
			if image.Pt(x, y).In(frame.Rect) {
				want = [3]uint8{250, 10, 20}
			}
			if got := [3]uint8(m.Row(y)[3*x : 3*x+3]); got != want {
				t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, got, want)
			}
		}
	}
}

// TestWebPCanvasMismatch rejects an extended WebP whose canvas is smaller than its frame:
// the decoder would allocate the frame's size, which the limit never saw.
func TestWebPCanvasMismatch(t *testing.T) {
	lossy := fixture(t, "lossy.webp")                                              // RIFF size WEBP "VP8 " ...
	vp8x := []byte("VP8X\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00") // canvas 1x1
	data := append(append(append([]byte{}, lossy[:12]...), vp8x...), lossy[12:]...)
	n := len(data) - 8
	data[4], data[5], data[6], data[7] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	if _, err := webp.DecodeConfig(bytes.NewReader(data)); err != nil {
		t.Fatalf("test file is not valid for x/image/webp: %v", err)
	}
	var fe *FormatError
	if _, err := goDecoder(t, Options{}).Decode(nil, data); !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *FormatError", err)
	}
}

func TestDecodeAllocsOwnParts(t *testing.T) {
	// Decoding allocates inside the standard decoders; conversion, resizing and
	// orientation must not. Measure those parts on their own after warm-up.
	m, err := jpeg.Decode(bytes.NewReader(fixture(t, "orient-6.jpg")))
	if err != nil {
		t.Fatal(err)
	}
	d := goDecoder(t, Options{Resize: ResizePolicy{Mode: ResizeShorter, Size: 20}})
	step := func() {
		toRGB(&d.full, m, &d.lut)
		d.rs.Resize(&d.mid, &d.full, image.Rect(0, 0, d.full.Width, d.full.Height), 26, 20)
		orient(&d.canvas, &d.mid, 6)
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("%v allocations per image in conversion, resize and orientation", n)
	}
}
