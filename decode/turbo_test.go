package decode

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// turboDecoder returns a Decoder on the libjpeg-turbo backend, or skips the test.
func turboDecoder(t testing.TB, o Options) *Decoder {
	t.Helper()
	if _, err := turbojpeg.Load(); err != nil {
		t.Skipf("libjpeg-turbo not available, so the turbo backend cannot be tested: %v", err)
	}
	t.Setenv(EnvBackend, "") // a CONVEYOR_DECODER=go in the environment would force Go
	o.Backend = BackendTurbo
	d, err := NewDecoder(&o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if d.Backend() != BackendTurbo {
		t.Fatalf("backend %q", d.Backend())
	}
	return d
}

// TestTurboMatchesGo is the differential test of the two JPEG backends: libjpeg-turbo
// (with DCT scaling when shrinking) against image/jpeg, within a mean absolute error of 2
// per channel and a PSNR of 35 dB.
func TestTurboMatchesGo(t *testing.T) {
	enc := func(m image.Image, q int) []byte {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	big := photo(640, 480)
	gray := image.NewGray(big.Rect)
	for i := range gray.Pix {
		gray.Pix[i] = big.Pix[4*i+1]
	}
	files := []struct {
		name string
		data []byte
	}{
		{"photo-420", enc(big, 90)},
		{"odd-size", enc(photo(333, 211), 85)},
		{"gray", enc(gray, 90)},
		{"progressive", fixture(t, "progressive.jpg")},
		{"orient-6", fixture(t, "orient-6.jpg")},
	}
	policies := []ResizePolicy{
		{},
		{Mode: ResizeShorter, Size: 200}, // 640x480 decodes at 7/8, then resizes
		{Mode: ResizeShorter, Size: 100}, // at 1/2
		{Mode: ResizeFit, Width: 64, Height: 64},
	}
	for _, p := range policies {
		turbo := turboDecoder(t, Options{Resize: p})
		golang := goDecoder(t, Options{Resize: p})
		for _, f := range files {
			t.Run(fmt.Sprintf("%s/%v", f.name, p), func(t *testing.T) {
				a, err := turbo.Decode(nil, f.data)
				if err != nil {
					t.Fatal(err)
				}
				b, err := golang.Decode(nil, f.data)
				if err != nil {
					t.Fatal(err)
				}
				if a.Width != b.Width || a.Height != b.Height {
					t.Fatalf("turbo %dx%d, go %dx%d", a.Width, a.Height, b.Width, b.Height)
				}
				mean, psnr := stats(a, b)
				if mean > 2 || psnr < 35 {
					t.Errorf("mean abs error %.2f, PSNR %.1f dB", mean, psnr)
				}
				t.Logf("%dx%d: mean abs error %.2f, PSNR %.1f dB", a.Width, a.Height, mean, psnr)
			})
		}
	}
}

// TestTurboFallsBack checks the files libjpeg-turbo declines: CMYK goes to image/jpeg
// with identical pixels, and damaged files fail the same way as on the Go backend.
func TestTurboFallsBack(t *testing.T) {
	turbo := turboDecoder(t, Options{})
	golang := goDecoder(t, Options{})
	cmyk := fixture(t, "cmyk.jpg")
	a, err := turbo.Decode(nil, cmyk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := golang.Decode(nil, cmyk)
	if err != nil {
		t.Fatal(err)
	}
	sameImage(t, a, b, 0)
	for _, name := range []string{"truncated.jpg", "corrupt.jpg", "huge.jpg"} {
		_, ea := turbo.Decode(nil, fixture(t, name))
		_, eb := golang.Decode(nil, fixture(t, name))
		if ea == nil || eb == nil || ea.Error() != eb.Error() {
			t.Errorf("%s: turbo %v, go %v", name, ea, eb)
		}
	}
}

func TestTurboScale(t *testing.T) {
	tj := turboDecoder(t, Options{}).turbo
	for _, tc := range []struct {
		w, h, tw, th int
		num, denom   int
	}{
		{640, 480, 640, 480, 1, 1},
		{640, 480, 320, 240, 1, 1},
		{640, 480, 160, 120, 1, 2},
		{640, 480, 161, 120, 1, 1}, // 1/2 gives 320 < 2*161; no 5/8
		{640, 480, 40, 30, 1, 4},   // 1/8 gives 80 < 3*40
		{640, 480, 26, 20, 1, 8},   // 1/8 gives 80×60 >= 3*(26×20)
		{640, 480, 53, 40, 1, 4},   // 1/4 gives 160×120 >= 3*(53×40)
		{640, 480, 54, 41, 1, 2},   // 1/4 gives 120 < 3*41; no 3/8
		{640, 480, 27, 1, 1, 4},    // 1/8 gives 80 < 3*27
		{1920, 1080, 455, 256, 1, 2},
		{333, 211, 64, 41, 1, 2}, // 1/4 gives 84 < 3*64
	} {
		if num, denom := tj.scale(tc.w, tc.h, tc.tw, tc.th); num*tc.denom != tc.num*denom {
			t.Errorf("scale(%dx%d -> %dx%d) = %d/%d, want %d/%d", tc.w, tc.h, tc.tw, tc.th, num, denom, tc.num, tc.denom)
		}
	}
	// Only the scales with SIMD inverse DCTs: the others decode slower than 1/2.
	var got []string
	for _, f := range tj.factors {
		got = append(got, fmt.Sprintf("%d/%d", f[0], f[1]))
	}
	if g := strings.Join(got, " "); g != "1/8 1/4 1/2 1/1" {
		t.Errorf("scales %s, want 1/8 1/4 1/2 1/1", g)
	}
}

// nativeDecoder returns a Decoder with the default backend, or skips the test unless
// backend reports lib.
func nativeDecoder(t *testing.T, backend func(*Decoder) string, lib string) *Decoder {
	t.Helper()
	t.Setenv(EnvBackend, "")
	d, err := NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if backend(d) != lib {
		t.Skipf("%s not available, so its decode path cannot be tested", lib)
	}
	return d
}

// TestWebPBackendsAgree decodes the WebP fixtures with libwebp and with x/image/webp (plus
// libwebp-compatible conversion): the pixels are identical.
func TestWebPBackendsAgree(t *testing.T) {
	native := nativeDecoder(t, (*Decoder).WebPBackend, "libwebp")
	golang := goDecoder(t, Options{})
	if golang.WebPBackend() != BackendGo {
		t.Fatalf("the Go backend uses %s for WebP", golang.WebPBackend())
	}
	for _, name := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "lossless-alpha.webp"} {
		a, err := native.Decode(nil, fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := golang.Decode(nil, fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		sameImage(t, a, b, 0)
	}
}

// TestPNGBackendsAgree decodes every PNG the tests have (all colour types and depths,
// palettes with transparency, interlaced, damaged) with the libdeflate path and with
// image/png: the same pixels, or the same error.
func TestPNGBackendsAgree(t *testing.T) {
	native := nativeDecoder(t, (*Decoder).PNGBackend, "libdeflate")
	golang := goDecoder(t, Options{})
	files := map[string][]byte{}
	for _, c := range generated(t) {
		if c.format == PNG {
			files[c.name] = c.data
		}
	}
	for _, n := range []string{"gradient.png", "gradient-alpha.png", "corrupt.png", "truncated.png", "transparent-gif-pil.png", "orient-6-pil.png", "hostile/png-zlib-bomb.png", "hostile/random.png"} {
		files[n] = fixture(t, n)
	}
	// Every filter type, in every colour type the fast path takes, from a photo-like image.
	var b bytes.Buffer
	if err := png.Encode(&b, photo(301, 97)); err != nil {
		t.Fatal(err)
	}
	files["photo"] = b.Bytes()
	for name, data := range files {
		a, ea := native.Decode(nil, data)
		g, eg := golang.Decode(nil, data)
		if (ea == nil) != (eg == nil) || ea != nil && ea.Error() != eg.Error() {
			t.Fatalf("%s: libdeflate path %v, image/png %v", name, ea, eg)
		}
		if ea == nil {
			sameImage(t, a, g, 0)
		}
	}
}

// rawPNG writes a w×h 8-bit PNG of colour type ct from unfiltered samples, filtering row y
// with filter y%5 (None, Sub, Up, Average, Paeth in turn), with a palette for type 3.
func rawPNG(t *testing.T, ct byte, w, h, bpp int, samples, palette []byte) []byte {
	t.Helper()
	var filtered []byte
	prev := make([]byte, w*bpp)
	for y := range h {
		cur := samples[y*w*bpp : (y+1)*w*bpp]
		f := byte(y % 5)
		filtered = append(filtered, f)
		for i := range cur {
			var a, c byte
			if i >= bpp {
				a, c = cur[i-bpp], prev[i-bpp]
			}
			b := prev[i]
			var pred byte
			switch f {
			case 1:
				pred = a
			case 2:
				pred = b
			case 3:
				pred = byte((int(a) + int(b)) / 2)
			case 4:
				pred = paeth(a, b, c)
			}
			filtered = append(filtered, cur[i]-pred)
		}
		prev = cur
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(filtered)
	zw.Close()
	chunk := func(kind string, body []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		out = append(out, kind...)
		out = append(out, body...)
		return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(kind), body...)))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, ct, 0, 0, 0)
	out := append([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr)...)
	if palette != nil {
		out = append(out, chunk("PLTE", palette)...)
	}
	out = append(out, chunk("IDAT", z.Bytes())...)
	return append(out, chunk("IEND", nil)...)
}

// TestPNGFilters checks every filter type in every colour type of the fast path against
// image/png.
func TestPNGFilters(t *testing.T) {
	native := nativeDecoder(t, (*Decoder).PNGBackend, "libdeflate")
	golang := goDecoder(t, Options{})
	rng := newRand()
	const w, h = 37, 23
	palette := make([]byte, 3*200)
	for i := range palette {
		palette[i] = byte(rng.IntN(256))
	}
	for _, tc := range []struct {
		ct  byte
		bpp int
	}{{0, 1}, {2, 3}, {3, 1}, {4, 2}, {6, 4}} {
		samples := make([]byte, w*h*tc.bpp)
		for i := range samples {
			samples[i] = byte(i*7 + rng.IntN(40)) // smooth with noise: every predictor matters
			if tc.ct == 3 {
				samples[i] %= 200
			}
		}
		var pal []byte
		if tc.ct == 3 {
			pal = palette
		}
		data := rawPNG(t, tc.ct, w, h, tc.bpp, samples, pal)
		a, err := native.Decode(nil, data)
		if err != nil {
			t.Fatalf("colour type %d: %v", tc.ct, err)
		}
		g, err := golang.Decode(nil, data)
		if err != nil {
			t.Fatalf("colour type %d: image/png: %v", tc.ct, err)
		}
		sameImage(t, a, g, 0)
		if tc.ct == 3 { // an index outside the palette: image/png decides
			samples[5] = 250
			data := rawPNG(t, tc.ct, w, h, tc.bpp, samples, pal)
			_, ea := native.Decode(nil, data)
			_, eg := golang.Decode(nil, data)
			if (ea == nil) != (eg == nil) {
				t.Errorf("out-of-palette index: libdeflate path %v, image/png %v", ea, eg)
			}
		}
	}
}

// TestRegionPlanesHoldChromaBelow: a region decode through libjpeg stops below the crop,
// but where the planes are then converted first (planar.go), the chroma upsampling of the
// crop's last row reads the chroma row below it when that row is odd. Converting the crop
// from the planes a region decode leaves must give what converting it from the whole
// image's planes gives, for crops ending on either parity and at an iMCU row's end.
func TestRegionPlanesHoldChromaBelow(t *testing.T) {
	d := turboDecoder(t, Options{})
	var tj *turboJPEG
	for _, b := range d.backends {
		if b, ok := b.(*turboJPEG); ok {
			tj = b
		}
	}
	if tj == nil || tj.rows == nil {
		t.Skip("libjpeg's API is not available, so region decodes read whole planes")
	}
	var up jpegUpsampler
	var part, whole Image
	for _, name := range []string{"seeding-800x599-420.jpg", "friends-333x500-420.jpg"} {
		data := photoFixture(t, name)
		h, err := d.header(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, maxY := range []int{159, 160, 161, 175, 176, 177, 191, 192, h.height - 1, h.height} {
			r := image.Rect(17, maxY-150, 17+300, maxY) // at most twice 224: full scale
			j := d.newJob(h, data, r, 224, 224, nil)
			out, err := tj.decode(&j)
			if err != nil {
				t.Fatal(err)
			}
			if out.crop != r {
				t.Fatalf("%s: crop %v decoded as %v, want full scale", name, r, out.crop)
			}
			up.convert(&part, out.planes.(*image.YCbCr), r)
			m, err := tj.decodeRows(data, h.width, h.height, h.height)
			if err != nil {
				t.Fatal(err)
			}
			up.convert(&whole, m.(*image.YCbCr), r)
			if md, x, y, ch := maxDiff(&part, &whole); md != 0 {
				t.Errorf("%s, crop %v: channel %d of pixel (%d,%d) differs by %d from the whole planes' conversion", name, r, ch, x, y, md)
			}
		}
	}
}
