package decode

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sequentialDir = fixtures + "/sequential"

// sequentialFixtures returns the names (without .jpg) of the sequential JPEG fixtures that
// have a libjpeg luma plane beside them.
func sequentialFixtures(t testing.TB) []string {
	pgms, err := filepath.Glob(filepath.Join(sequentialDir, "*.y.pgm"))
	if err != nil || len(pgms) < 10 {
		t.Fatalf("sequential fixtures: %d found, %v (run %s/make.sh)", len(pgms), err, sequentialDir)
	}
	var names []string
	for _, p := range pgms {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".y.pgm"))
	}
	return names
}

// readPGM reads a binary 8-bit PGM.
func readPGM(t testing.TB, path string) (pix []byte, w, h int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var maxv int
	if _, err := fmt.Sscanf(string(b), "P5\n%d %d\n%d\n", &w, &h, &maxv); err != nil || maxv != 255 || len(b) < w*h {
		t.Fatalf("%s: not an 8-bit binary PGM: %v", path, err)
	}
	return b[len(b)-w*h:], w, h
}

// fastPlanes decodes data with a jpegFast over region r.
func fastPlanes(t testing.TB, d *jpegFast, data []byte, r image.Rectangle) image.Image {
	t.Helper()
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if r.Empty() {
		r = image.Rect(0, 0, cfg.Width, cfg.Height)
	}
	m, err := d.decode(data, cfg.Width, cfg.Height, r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// luma returns the luma (or grey) plane of a decoded JPEG.
func luma(m image.Image) (pix []byte, stride int) {
	switch m := m.(type) {
	case *image.YCbCr:
		return m.Y, m.YStride
	case *image.Gray:
		return m.Pix, m.Stride
	}
	panic(fmt.Sprintf("unexpected %T", m))
}

// TestJPEGFastMatchesLibjpeg checks the fast path against libjpeg and image/jpeg on every
// layout it handles: 4:4:4 to 4:1:0, greyscale, restart markers, non-interleaved scans,
// optimised tables, quality 100 and 16-bit quantisation tables. The luma plane must equal
// libjpeg's (djpeg -dct int) exactly, since the inverse DCT is the same; each chroma plane
// must be within 1 of image/jpeg's, whose inverse DCT differs.
func TestJPEGFastMatchesLibjpeg(t *testing.T) {
	var d jpegFast
	for _, name := range sequentialFixtures(t) {
		t.Run(name, func(t *testing.T) {
			data := fixture(t, "sequential/"+name+".jpg")
			m := fastPlanes(t, &d, data, image.Rectangle{})
			want, w, h := readPGM(t, filepath.Join(sequentialDir, name+".y.pgm"))
			if b := m.Bounds(); b != image.Rect(0, 0, w, h) {
				t.Fatalf("bounds %v, want %dx%d", b, w, h)
			}
			y, stride := luma(m)
			for r := 0; r < h; r++ {
				for c := 0; c < w; c++ {
					if got := y[r*stride+c]; got != want[r*w+c] {
						t.Fatalf("luma (%d,%d) = %d, libjpeg %d", c, r, got, want[r*w+c])
					}
				}
			}
			ref, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				// libjpeg decodes it, so the fast path should too.
				t.Logf("image/jpeg rejects it (%v): chroma not compared", err)
				return
			}
			if got, ok := m.(*image.YCbCr); ok {
				ry, ok := ref.(*image.YCbCr)
				if !ok || ry.SubsampleRatio != got.SubsampleRatio {
					t.Fatalf("image/jpeg gives %T, fast path %v", ref, got.SubsampleRatio)
				}
				worst := 0
				for r := 0; r < h; r++ {
					for c := 0; c < w; c++ {
						i, j := got.COffset(c, r), ry.COffset(c, r)
						worst = max(worst, absDiff(got.Cb[i], ry.Cb[j]), absDiff(got.Cr[i], ry.Cr[j]))
					}
				}
				if worst > 1 {
					t.Errorf("chroma differs from image/jpeg's by up to %d", worst)
				}
			}
		})
	}
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// TestJPEGFastRegion checks that a region decode produces the same samples as a whole
// decode in every MCU that meets the region, for random regions of every layout.
func TestJPEGFastRegion(t *testing.T) {
	var whole, part jpegFast
	rng := newRand()
	for _, name := range sequentialFixtures(t) {
		data := fixture(t, "sequential/"+name+".jpg")
		full := fastPlanes(t, &whole, data, image.Rectangle{})
		fy, fs := luma(full)
		b := full.Bounds()
		for range 20 {
			x0, y0 := rng.IntN(b.Dx()), rng.IntN(b.Dy())
			r := image.Rect(x0, y0, x0+1+rng.IntN(b.Dx()-x0), y0+1+rng.IntN(b.Dy()-y0))
			// Stale samples from an earlier decode must not show through: start dirty.
			for i := range part.planes {
				for j := range part.planes[i] {
					part.planes[i][j] = 0x55
				}
			}
			m := fastPlanes(t, &part, data, r)
			py, ps := luma(m)
			for y := r.Min.Y; y < r.Max.Y; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					if py[y*ps+x] != fy[y*fs+x] {
						t.Fatalf("%s: region %v: luma (%d,%d) = %d, whole decode %d", name, r, x, y, py[y*ps+x], fy[y*fs+x])
					}
				}
			}
			if pc, ok := m.(*image.YCbCr); ok {
				fc := full.(*image.YCbCr)
				ra := alignRect(pc, r)
				for y := ra.Min.Y; y < r.Max.Y; y++ {
					for x := ra.Min.X; x < r.Max.X; x++ {
						i, j := pc.COffset(x, y), fc.COffset(x, y)
						if pc.Cb[i] != fc.Cb[j] || pc.Cr[i] != fc.Cr[j] {
							t.Fatalf("%s: region %v: chroma at (%d,%d) differs from the whole decode", name, r, x, y)
						}
					}
				}
			}
		}
	}
}

// TestJPEGFastDeclines checks what the fast path leaves to image/jpeg, and that the
// Decoder then still decodes (or rejects) such files as image/jpeg does.
func TestJPEGFastDeclines(t *testing.T) {
	var d jpegFast
	for _, tc := range []struct {
		file     string
		fallback bool // errJPEGFallback rather than a fault
	}{
		{"progressive.jpg", true},
		{"cmyk.jpg", true},
		{"sequential/arithmetic.jpg", true},
		{"truncated.jpg", false},
		{"corrupt.jpg", false},
	} {
		data := fixture(t, tc.file)
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			cfg.Width, cfg.Height = 64, 48
		}
		_, err = d.decode(data, cfg.Width, cfg.Height, image.Rect(0, 0, cfg.Width, cfg.Height))
		if err == nil || errors.Is(err, errJPEGFallback) != tc.fallback {
			t.Errorf("%s: fast path says %v; want a fallback: %v", tc.file, err, tc.fallback)
		}
		_, stdErr := jpeg.Decode(bytes.NewReader(data))
		_, decErr := goDecoder(t, Options{}).Decode(nil, data)
		if (stdErr == nil) != (decErr == nil) {
			t.Errorf("%s: image/jpeg says %v, the Decoder %v", tc.file, stdErr, decErr)
		}
	}
}

// TestJPEGFastDamage cuts and corrupts a fixture in many ways: the fast path must never
// panic, must reject every truncation (a file without its EOI), and must decode the whole
// Decoder's way: whatever it rejects, image/jpeg decides.
func TestJPEGFastDamage(t *testing.T) {
	var d jpegFast
	dec := goDecoder(t, Options{})
	for _, name := range []string{"sample-2x2", "restart", "non-interleaved", "gray-restart"} {
		data := fixture(t, "sequential/"+name+".jpg")
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		r := image.Rect(0, 0, cfg.Width, cfg.Height)
		for n := 0; n < len(data)-2; n += 1 + n/50 {
			if _, err := d.decode(data[:n], cfg.Width, cfg.Height, r); err == nil {
				t.Fatalf("%s cut to %d of %d bytes decoded", name, n, len(data))
			}
		}
		rng := rand.New(rand.NewPCG(3, uint64(len(data))))
		bad := make([]byte, len(data))
		var fresh jpegFast
		want, _ := luma(fastPlanes(t, &fresh, data, image.Rectangle{}))
		want = append([]byte(nil), want...)
		for range 300 {
			copy(bad, data)
			for range 1 + rng.IntN(4) {
				bad[rng.IntN(len(bad))] = byte(rng.IntN(256))
			}
			_, _ = d.decode(bad, cfg.Width, cfg.Height, r) // must not panic
			if _, err := dec.Decode(nil, bad); err != nil {
				checkError(t, err)
			}
			// Nothing of a failed decode may leak into the next one.
			if got, _ := luma(fastPlanes(t, &d, data, image.Rectangle{})); !bytes.Equal(got[:len(want)], want) {
				t.Fatalf("%s: a decode after a damaged file differs from a fresh decoder's", name)
			}
		}
	}
}

// TestJPEGFastRestartNumbers renumbers every restart marker of a fixture to RST0: the
// fast path must reject it (as image/jpeg does) rather than decode it as if intact.
func TestJPEGFastRestartNumbers(t *testing.T) {
	for _, name := range []string{"restart", "gray-restart"} {
		data := bytes.Clone(fixture(t, "sequential/"+name+".jpg"))
		n := 0
		for i := bytes.Index(data, []byte{0xff, 0xda}); i+1 < len(data); i++ {
			if data[i] == 0xff && data[i+1] >= 0xd1 && data[i+1] <= 0xd7 {
				data[i+1] = 0xd0
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%s: no restart markers", name)
		}
		var d jpegFast
		cfg, _ := jpeg.DecodeConfig(bytes.NewReader(data))
		if _, err := d.decode(data, cfg.Width, cfg.Height, image.Rect(0, 0, cfg.Width, cfg.Height)); err == nil {
			t.Errorf("%s with %d misnumbered restart markers decoded", name, n)
		}
		_, stdErr := jpeg.Decode(bytes.NewReader(data))
		_, decErr := goDecoder(t, Options{}).Decode(nil, data)
		if (stdErr == nil) != (decErr == nil) {
			t.Errorf("%s: image/jpeg says %v, the Decoder %v", name, stdErr, decErr)
		}
	}
}

// TestJPEGHeaderSmuggling hides a small frame header where the header walk could mistake
// a stuffed zero (FF 00) for a segment with a length, while image/jpeg sees a huge frame
// first: the size reported, and so the pixel limit, must be image/jpeg's.
func TestJPEGHeaderSmuggling(t *testing.T) {
	sof := func(w, h int) []byte {
		return []byte{0xff, 0xc0, 0, 17, 8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 3,
			1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1}
	}
	big, small := sof(4000, 4000), sof(77, 59)
	app1 := []byte{0xff, 0xe1, 0, byte(2 + len(small))}
	l := 2 + len(big) + len(app1)
	data := []byte{0xff, 0xd8, 0xff, 0x00, byte(l >> 8), byte(l)}
	data = append(data, big...)
	data = append(data, app1...)
	data = append(data, small...)
	data = append(data, bytes.Repeat([]byte{0x55}, 50000)...)
	data = append(data, 0xff, 0xd9)
	if w, h, ok := jpegFrameSize(data); ok {
		t.Errorf("header walk answered %dx%d for a file with a stuffed zero before its frame", w, h)
	}
	if cfg, err := ReadConfig(data); err == nil && (cfg.Width != 4000 || cfg.Height != 4000) {
		t.Errorf("ReadConfig = %dx%d, image/jpeg sees 4000x4000", cfg.Width, cfg.Height)
	}
	d := goDecoder(t, Options{MaxPixels: 1 << 20})
	if _, err := d.Decode(nil, data); !errors.Is(err, ErrTooLarge) {
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("Decode: %v, want ErrTooLarge or a FormatError before allocating", err)
		}
	}
}

// TestJPEGFastAllocs checks that a warm fast path allocates nothing per image.
func TestJPEGFastAllocs(t *testing.T) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo(500, 375), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	var d jpegFast
	data := buf.Bytes()
	r := image.Rect(100, 50, 400, 300)
	fastPlanes(t, &d, data, r)
	if n := testing.AllocsPerRun(20, func() {
		if _, err := d.decode(data, 500, 375, r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per decode, want 0", n)
	}
}

// TestIdctIslowDCOnly checks the shortcut for blocks without AC coefficients against the
// full transform, over the whole range of dequantised DC values.
func TestIdctIslowDCOnly(t *testing.T) {
	var out, want [64]byte
	for dc := int32(-2048 * 8); dc <= 2047*8; dc++ {
		var blk [64]int32
		blk[0] = dc
		idctIslow(&blk, want[:], 8)
		v := clampSample((dc+4)>>3 + 128)
		for i := range out {
			out[i] = v
		}
		if out != want {
			t.Fatalf("DC %d: shortcut %d, transform %v", dc, v, want)
		}
	}
}

// TestJPEGFrameSize checks the header fast path against image/jpeg on every JPEG
// fixture: where it answers, image/jpeg reads the same size.
func TestJPEGFrameSize(t *testing.T) {
	answered := 0
	for _, dir := range []string{fixtures, hostileDir, sequentialDir} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || Sniff(data) != JPEG {
				continue
			}
			w, h, ok := jpegFrameSize(data)
			cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
			if !ok {
				continue
			}
			answered++
			if err != nil || cfg.Width != w || cfg.Height != h {
				t.Errorf("%s: frame size %dx%d; image/jpeg %dx%d, %v", f, w, h, cfg.Width, cfg.Height, err)
			}
		}
	}
	if answered < 20 {
		t.Errorf("the fast path answered for %d fixtures only", answered)
	}
}

// FuzzJPEGFast feeds arbitrary bytes, with the fixtures as seeds, to the fast path over a
// random region: it must not panic, and what it accepts must have the header's size.
// It also checks jpegFrameSize against image/jpeg's DecodeConfig.
func FuzzJPEGFast(f *testing.F) {
	addSeeds(f)
	var d jpegFast
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("input over maxFuzzInput")
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if w, h, ok := jpegFrameSize(data); ok && err == nil && (w != cfg.Width || h != cfg.Height) {
			t.Fatalf("frame size %dx%d, image/jpeg %dx%d", w, h, cfg.Width, cfg.Height)
		}
		if err != nil || cfg.Width*cfg.Height > fuzzPixels {
			return
		}
		r := image.Rect(cfg.Width/3, cfg.Height/4, cfg.Width, cfg.Height)
		if r.Empty() {
			r = image.Rect(0, 0, cfg.Width, cfg.Height)
		}
		m, err := d.decode(data, cfg.Width, cfg.Height, r)
		if err == nil && m.Bounds() != image.Rect(0, 0, cfg.Width, cfg.Height) {
			t.Fatalf("decoded %v, header says %dx%d", m.Bounds(), cfg.Width, cfg.Height)
		}
	})
}

// TestGoJPEGMatchesTurbo decodes real 4:2:0 and 4:2:2 photos and the sequential fixtures
// (every sampling layout, restart markers, odd sizes) whole on the Go backend and with
// libjpeg-turbo: at most 2 levels apart. The inverse DCT is the same; the chroma
// upsampling is libjpeg-turbo's; what remains is the colour conversion's arithmetic
// (color.YCbCrToRGB against libjpeg's tables). Replicating chroma instead is up to a
// hundred levels off at sharp colour edges.
func TestGoJPEGMatchesTurbo(t *testing.T) {
	turbo := turboDecoder(t, Options{})
	golang := goDecoder(t, Options{})
	files := []string{
		"photos/seeding-800x599-420.jpg", "photos/seeding-800x599-422.jpg",
		"photos/friends-333x500-420.jpg", "photos/ladybird-333x500-422.jpg",
	}
	for _, name := range sequentialFixtures(t) {
		files = append(files, "sequential/"+name+".jpg")
	}
	// Tiny images: libjpeg-turbo replicates chroma two samples wide or less.
	tiny := map[string][]byte{}
	for _, w := range []int{1, 2, 3, 4, 5, 6, 9} {
		for _, h := range []int{1, 2, 3, 5} {
			var b bytes.Buffer
			if err := jpeg.Encode(&b, photo(w, h), &jpeg.Options{Quality: 95}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("tiny-%dx%d", w, h)
			tiny[name] = b.Bytes()
			files = append(files, name)
		}
	}
	var fast jpegFast
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			data, ok := tiny[name]
			if !ok {
				data = fixture(t, name)
			}
			m := fastPlanes(t, &fast, data, image.Rectangle{}) // the Go path, not image/jpeg's
			a, err := golang.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			b, err := turbo.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			d, x, y, c := maxDiff(a, b)
			_, psnr := stats(a, b)
			layout := "grey"
			if y, ok := m.(*image.YCbCr); ok {
				layout = y.SubsampleRatio.String()
			}
			t.Logf("%dx%d %s: max difference %d, PSNR %.1f dB", a.Width, a.Height, layout, d, psnr)
			if d > 2 {
				t.Errorf("channel %d of pixel (%d,%d): go %d, libjpeg-turbo %d", c, x, y, a.Row(y)[3*x+c], b.Row(y)[3*x+c])
			}
		})
	}
}
