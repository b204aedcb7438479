package turbojpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// loadOrSkip returns the library, or skips the test where it is absent.
func loadOrSkip(tb testing.TB) *Lib {
	tb.Helper()
	l, err := Load()
	if err != nil {
		tb.Skipf("libjpeg-turbo not available (install libturbojpeg0): %v", err)
	}
	return l
}

func newDecompressor(tb testing.TB) *Decompressor {
	tb.Helper()
	d, err := loadOrSkip(tb).NewDecompressor()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// photo returns a deterministic w x h image with smooth gradients, some
// edges and mild noise: closer to a photo than a flat fill, without the
// pathological chroma of pure noise. gray selects *image.Gray.
func photo(w, h int, gray bool, seed uint64) image.Image {
	r := rand.New(rand.NewPCG(seed, 7))
	fx, fy := 0.02+r.Float64()*0.05, 0.02+r.Float64()*0.05
	var g *image.Gray
	var c *image.RGBA
	if gray {
		g = image.NewGray(image.Rect(0, 0, w, h))
	} else {
		c = image.NewRGBA(image.Rect(0, 0, w, h))
	}
	clamp := func(v float64) uint8 { return uint8(math.Max(0, math.Min(255, v))) }
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := r.Float64()*12 - 6 // luminance noise: photos have little chroma noise
			base := 128 + 60*math.Sin(float64(x)*fx) + 40*math.Cos(float64(y)*fy)
			if (x/23+y/31)%5 == 0 { // a few hard edges
				base -= 50
			}
			if gray {
				g.Pix[y*g.Stride+x] = clamp(base + n)
				continue
			}
			i := y*c.Stride + 4*x
			c.Pix[i+0] = clamp(base + n)
			// Gradients in absolute coordinates, so a small image is like
			// a crop of a photo, not a whole photo squeezed into few pixels.
			c.Pix[i+1] = clamp(float64(x)/2 + n)
			c.Pix[i+2] = clamp(float64(y)/1.5 - 0.3*base + 60 + n)
			c.Pix[i+3] = 255
		}
	}
	if gray {
		return g
	}
	return c
}

func encode(tb testing.TB, img image.Image, quality int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// stdRGB decodes data with image/jpeg into packed RGB, converting with
// color.YCbCrToRGB (nearest-neighbour chroma).
func stdRGB(tb testing.TB, data []byte) (rgb []byte, w, h int) {
	tb.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	b := img.Bounds()
	w, h = b.Dx(), b.Dy()
	rgb = make([]byte, 3*w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := 3 * (y*w + x)
			switch m := img.(type) {
			case *image.YCbCr:
				c := m.YCbCrAt(b.Min.X+x, b.Min.Y+y)
				rgb[i], rgb[i+1], rgb[i+2] = color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
			case *image.Gray:
				v := m.GrayAt(b.Min.X+x, b.Min.Y+y).Y
				rgb[i], rgb[i+1], rgb[i+2] = v, v, v
			default:
				tb.Fatalf("image/jpeg returned %T", img)
			}
		}
	}
	return rgb, w, h
}

// diff returns the mean absolute difference per channel and the maximum.
func diff(a, b []byte) (mean [3]float64, max int) {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		mean[i%3] += float64(d)
		if d > max {
			max = d
		}
	}
	for c := range mean {
		mean[c] /= float64(len(a) / 3)
	}
	return mean, max
}

func TestLoad(t *testing.T) {
	l := loadOrSkip(t)
	l2, err := Load()
	if err != nil || l2 != l {
		t.Fatalf("second Load = %p, %v; want %p, nil", l2, err, l)
	}
	sf := l.ScalingFactors()
	for _, want := range [][2]int{{1, 1}, {1, 2}, {1, 4}, {1, 8}} {
		if !l.validFactor(want[0], want[1]) {
			t.Errorf("scaling factor %d/%d missing from %v", want[0], want[1], sf)
		}
	}
	sf[0] = [2]int{99, 1}
	if l.validFactor(99, 1) {
		t.Error("ScalingFactors returned the Lib's own slice")
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := load("libturbojpeg-absent.so.0"); err == nil || !strings.Contains(err.Error(), "libturbojpeg-absent.so.0") {
		t.Errorf("load(absent) = %v; want an error naming the library", err)
	}
	if _, err := Load(); err != nil {
		t.Skip(err)
	}
	// A library without the symbols: the error lists them.
	_, err := load("libc.so.6")
	if err == nil || !strings.Contains(err.Error(), "tjInitDecompress") || !strings.Contains(err.Error(), "tjDecompress2") {
		t.Errorf("load(libc.so.6) = %v; want an error naming the missing symbols", err)
	}
}

func TestScaledSize(t *testing.T) {
	for _, c := range []struct{ w, h, num, denom, ww, wh int }{
		{500, 375, 1, 1, 500, 375},
		{500, 375, 1, 2, 250, 188},
		{500, 375, 1, 4, 125, 94},
		{500, 375, 1, 8, 63, 47},
		{1, 1, 1, 8, 1, 1},
		{17, 33, 3, 4, 13, 25},
	} {
		if w, h := ScaledSize(c.w, c.h, c.num, c.denom); w != c.ww || h != c.wh {
			t.Errorf("ScaledSize(%d, %d, %d/%d) = %d, %d; want %d, %d", c.w, c.h, c.num, c.denom, w, h, c.ww, c.wh)
		}
	}
}

// TestMatchesImageJPEG is the differential test against the pure-Go path.
func TestMatchesImageJPEG(t *testing.T) {
	d := newDecompressor(t)
	for _, c := range []struct {
		w, h    int
		gray    bool
		quality int
	}{
		{1, 1, false, 90},
		{7, 5, false, 90},
		{16, 16, false, 75},
		{33, 17, false, 90},
		{100, 61, false, 95},
		{500, 375, false, 90},
		{257, 129, true, 90},
		{15, 9, true, 75},
	} {
		t.Run(fmt.Sprintf("%dx%d-gray=%v-q%d", c.w, c.h, c.gray, c.quality), func(t *testing.T) {
			data := encode(t, photo(c.w, c.h, c.gray, uint64(c.w*c.h)), c.quality)
			w, h, ss, cs, err := d.Header(data)
			if err != nil || w != c.w || h != c.h {
				t.Fatalf("Header = %d, %d, %v; want %d, %d", w, h, err, c.w, c.h)
			}
			wantSS, wantCS := SAMP420, CSYCbCr
			if c.gray {
				wantSS, wantCS = SAMPGray, CSGray
			}
			if ss != wantSS || cs != wantCS {
				t.Errorf("Header subsamp, colorspace = %d, %d; want %d, %d", ss, cs, wantSS, wantCS)
			}
			got := make([]byte, 3*w*h)
			gw, gh, err := d.DecodeRGB(got, data, 1, 1)
			if err != nil || gw != w || gh != h {
				t.Fatalf("DecodeRGB = %d, %d, %v", gw, gh, err)
			}
			want, _, _ := stdRGB(t, data)
			mean, max := diff(got, want)
			t.Logf("mean abs diff %.2f, max %d", mean, max)
			for ch, m := range mean {
				if m > 2 {
					t.Errorf("channel %d: mean abs diff %.2f > 2", ch, m)
				}
			}
			// libjpeg-turbo interpolates 4:2:0 chroma ("fancy upsampling"),
			// image/jpeg replicates it, so chroma edges differ by more than
			// rounding; gray has no chroma.
			limit := 24
			if c.gray {
				limit = 3
			}
			if max > limit {
				t.Errorf("max abs diff %d > %d", max, limit)
			}
			// With nearest-neighbour chroma, as in image/jpeg, only IDCT
			// and color-conversion rounding remain.
			if _, _, err := d.decode(got, data, 1, 1, decodeFlags|flagFastUpsample); err != nil {
				t.Fatal(err)
			}
			if mean, max := diff(got, want); max > 4 {
				t.Errorf("with TJFLAG_FASTUPSAMPLE: mean abs diff %.2f, max %d > 4", mean, max)
			}
		})
	}
}

// TestFastUpsample reports how much TJFLAG_FASTUPSAMPLE (off by default)
// changes the output, and that it brings libjpeg-turbo closer to image/jpeg.
func TestFastUpsample(t *testing.T) {
	d := newDecompressor(t)
	data := encode(t, photo(500, 375, false, 1), 90)
	fancy := make([]byte, 3*500*375)
	fast := make([]byte, len(fancy))
	if _, _, err := d.decode(fancy, data, 1, 1, decodeFlags); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.decode(fast, data, 1, 1, decodeFlags|flagFastUpsample); err != nil {
		t.Fatal(err)
	}
	want, _, _ := stdRGB(t, data)
	m1, x1 := diff(fancy, fast)
	m2, x2 := diff(fancy, want)
	m3, x3 := diff(fast, want)
	t.Logf("fancy vs fast upsampling: mean %.2f max %d", m1, x1)
	t.Logf("fancy vs image/jpeg:      mean %.2f max %d", m2, x2)
	t.Logf("fast  vs image/jpeg:      mean %.2f max %d", m3, x3)
	if x1 == 0 {
		t.Error("TJFLAG_FASTUPSAMPLE changed nothing on a 4:2:0 image")
	}
}

func TestScaledDecode(t *testing.T) {
	d := newDecompressor(t)
	for _, size := range [][2]int{{500, 375}, {33, 17}, {3, 2}} {
		data := encode(t, photo(size[0], size[1], false, 3), 90)
		full, _, _ := stdRGB(t, data)
		for _, f := range [][2]int{{1, 2}, {1, 4}, {1, 8}, {3, 4}} {
			t.Run(fmt.Sprintf("%dx%d@%d/%d", size[0], size[1], f[0], f[1]), func(t *testing.T) {
				ww, wh := ScaledSize(size[0], size[1], f[0], f[1])
				dst := make([]byte, 3*ww*wh)
				w, h, err := d.DecodeRGB(dst, data, f[0], f[1])
				if err != nil || w != ww || h != wh {
					t.Fatalf("DecodeRGB = %d, %d, %v; want %d, %d", w, h, err, ww, wh)
				}
				if size[0] < 64 {
					return // too few pixels for the content check below
				}
				// The scaled image should be close to the full image
				// sampled at the same places (a loose check that the scale
				// and orientation are right, not a resampling test).
				var sum float64
				for y := 0; y < h; y++ {
					for x := 0; x < w; x++ {
						sx, sy := min(x*size[0]/w, size[0]-1), min(y*size[1]/h, size[1]-1)
						for c := 0; c < 3; c++ {
							sum += math.Abs(float64(dst[3*(y*w+x)+c]) - float64(full[3*(sy*size[0]+sx)+c]))
						}
					}
				}
				if mean := sum / float64(3*w*h); mean > 20 {
					t.Errorf("scaled image far from the full one: mean abs diff %.1f", mean)
				}
			})
		}
	}
}

func TestArguments(t *testing.T) {
	d := newDecompressor(t)
	data := encode(t, photo(40, 30, false, 4), 90)
	if _, _, err := d.DecodeRGB(make([]byte, 3*40*30-1), data, 1, 1); err == nil {
		t.Error("DecodeRGB into a short dst: no error")
	}
	if _, _, err := d.DecodeRGB(make([]byte, 3*20*15), data, 1, 2); err != nil {
		t.Errorf("DecodeRGB into an exact dst at 1/2: %v", err)
	}
	for _, f := range [][2]int{{1, 3}, {2, 4}, {0, 1}, {1, 0}, {-1, 8}} {
		if _, _, err := d.DecodeRGB(make([]byte, 3*40*30*4), data, f[0], f[1]); err == nil {
			t.Errorf("DecodeRGB at %d/%d: no error", f[0], f[1])
		}
	}
	if _, _, err := d.DecodeRGB(nil, nil, 1, 1); err == nil {
		t.Error("DecodeRGB(nil, nil): no error")
	}
	if _, _, _, _, err := d.Header(nil); err == nil {
		t.Error("Header(nil): no error")
	}
}

func TestClose(t *testing.T) {
	d, err := loadOrSkip(t).NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := d.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	data := encode(t, photo(8, 8, false, 5), 90)
	if _, _, err := d.DecodeRGB(make([]byte, 3*64), data, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("DecodeRGB after Close = %v; want ErrClosed", err)
	}
	if _, _, _, _, err := d.Header(data); !errors.Is(err, ErrClosed) {
		t.Errorf("Header after Close = %v; want ErrClosed", err)
	}
}

// TestCorrupt feeds damaged data: every case must return an error (or, for
// damage libjpeg cannot see, a full-size image), never crash.
func TestCorrupt(t *testing.T) {
	d := newDecompressor(t)
	good := encode(t, photo(64, 48, false, 6), 90)
	sos := bytes.Index(good, []byte{0xff, 0xda})
	if sos < 0 {
		t.Fatal("no SOS marker")
	}
	flipped := bytes.Clone(good)
	for i := sos + 20; i < len(flipped)-2; i += 7 {
		flipped[i] ^= 0x5a
	}
	// huge declares 65000x65000 in SOF0 of an otherwise 64x48 file.
	huge := bytes.Clone(good)
	if sof := bytes.Index(huge, []byte{0xff, 0xc0}); sof >= 0 {
		huge[sof+5], huge[sof+6], huge[sof+7], huge[sof+8] = 0xfd, 0xe8, 0xfd, 0xe8
	}
	cases := map[string][]byte{
		"empty":         {},
		"one byte":      {0xff},
		"SOI only":      {0xff, 0xd8},
		"SOI EOI":       {0xff, 0xd8, 0xff, 0xd9},
		"not a jpeg":    []byte("GIF89a this is not a JPEG at all, honest"),
		"png magic":     {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13},
		"cut in header": good[:sos/2],
		"cut at SOS":    good[:sos+2],
		"cut mid scan":  good[:sos+(len(good)-sos)/2],
		"no EOI":        good[:len(good)-2],
		"bit flips":     flipped,
		"huge header":   huge,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dst := make([]byte, 3*64*48)
			w, h, err := d.DecodeRGB(dst, data, 1, 1)
			t.Logf("DecodeRGB = %d, %d, %v", w, h, err)
			if err == nil && (w != 64 || h != 48) {
				t.Errorf("no error, but %dx%d", w, h)
			}
			if name == "bit flips" {
				return // may decode to garbage without a complaint
			}
			if err == nil {
				t.Error("no error")
			}
			var te *Error
			if name == "cut mid scan" && (!errors.As(err, &te) || !te.Warning) {
				t.Errorf("truncated scan: %v; want an *Error with Warning set", err)
			}
		})
	}
	// The decompressor must still work after all that, Header included
	// (libjpeg-turbo 2.x leaves an instance mid-header after some errors).
	if _, _, err := d.DecodeRGB(make([]byte, 3*64*48), good, 1, 1); err != nil {
		t.Fatalf("good JPEG after corrupt ones: %v", err)
	}
	for name, data := range cases {
		d.Header(data)
		if w, h, _, _, err := d.Header(good); err != nil || w != 64 || h != 48 {
			t.Errorf("Header(good) after Header(%s) = %d, %d, %v", name, w, h, err)
		}
	}
}

// TestExtraneousBytes documents the warning policy on the most common benign
// damage in real datasets: junk before a marker. libjpeg-turbo stops at the
// warning; image/jpeg accepts the file, so callers fall back to it.
func TestExtraneousBytes(t *testing.T) {
	d := newDecompressor(t)
	good := encode(t, photo(32, 32, false, 8), 90)
	sos := bytes.Index(good, []byte{0xff, 0xda})
	junk := append(append(bytes.Clone(good[:sos]), 0x00, 0x00), good[sos:]...)
	_, _, err := d.DecodeRGB(make([]byte, 3*32*32), junk, 1, 1)
	var te *Error
	if !errors.As(err, &te) || !te.Warning {
		t.Fatalf("DecodeRGB = %v; want an *Error with Warning set", err)
	}
	t.Logf("turbojpeg: %v", err)
	if _, err := jpeg.Decode(bytes.NewReader(junk)); err != nil {
		t.Errorf("image/jpeg rejects it too: %v", err)
	}
}

func TestCMYKUnsupported(t *testing.T) {
	d := newDecompressor(t)
	// image/jpeg cannot write CMYK, so only the frame header: SOF0 with
	// four components, as Adobe CMYK/YCCK files have.
	data := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 20, 8, 0, 16, 0, 16, 4,
		1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0, 4, 0x11, 0, 0xff, 0xd9}
	if _, _, err := d.DecodeRGB(make([]byte, 3*16*16), data, 1, 1); !errors.Is(err, ErrUnsupported) {
		t.Errorf("DecodeRGB(CMYK) = %v; want ErrUnsupported", err)
	}
}

// TestDropped checks that Decompressors dropped without Close are freed by
// their cleanup without harm.
func TestDropped(t *testing.T) {
	l := loadOrSkip(t)
	data := encode(t, photo(16, 16, false, 13), 90)
	for i := 0; i < 50; i++ {
		d, err := l.NewDecompressor()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.DecodeRGB(make([]byte, 3*16*16), data, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}

// TestParallel runs several Decompressors at once (run with -race).
func TestParallel(t *testing.T) {
	l := loadOrSkip(t)
	data := encode(t, photo(96, 64, false, 9), 90)
	want := make([]byte, 3*96*64)
	if _, _, err := newDecompressor(t).DecodeRGB(want, data, 1, 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.NewDecompressor()
			if err != nil {
				t.Error(err)
				return
			}
			defer d.Close()
			got := make([]byte, len(want))
			for i := 0; i < 20; i++ {
				if _, _, err := d.DecodeRGB(got, data, 1, 1); err != nil || !bytes.Equal(got, want) {
					t.Errorf("goroutine %d: err %v, equal %v", g, err, bytes.Equal(got, want))
					return
				}
				// A failing call in between must not leak its message to
				// another goroutine's decompressor.
				if _, _, err := d.DecodeRGB(got, data[:len(data)/2], 1, 1); err == nil {
					t.Errorf("goroutine %d: truncated decode succeeded", g)
				}
			}
		}()
	}
	wg.Wait()
}

// Go allocations per call, all inside purego v0.8.4's SyscallN, which
// heap-allocates its argument block and (with arguments) its variadic slice:
// Header is one C call; DecodeRGB is tjDecompress2 plus, on a used
// Decompressor, tjInitDecompress and tjDestroy (see reset).
const (
	headerAllocs = 2
	decodeAllocs = 2 + 1 + 2
)

func TestAllocs(t *testing.T) {
	d := newDecompressor(t)
	data := encode(t, photo(64, 48, false, 10), 90)
	dst := make([]byte, 3*64*48)
	for _, f := range [][2]int{{1, 1}, {1, 2}} {
		n := testing.AllocsPerRun(20, func() {
			if _, _, err := d.DecodeRGB(dst, data, f[0], f[1]); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("DecodeRGB at %d/%d: %.1f allocations per call", f[0], f[1], n)
		if n > decodeAllocs {
			t.Errorf("DecodeRGB at %d/%d: %.1f allocations per call; want <= %d", f[0], f[1], n, decodeAllocs)
		}
	}
	n := testing.AllocsPerRun(20, func() { d.Header(data) })
	if n > headerAllocs {
		t.Errorf("Header: %.1f allocations per call; want <= %d", n, headerAllocs)
	}
}

// stripSegments returns data without the marker segments of type m that
// precede the first scan.
func stripSegments(data []byte, m byte) []byte {
	out := []byte{0xff, 0xd8}
	for i := 2; i+4 <= len(data); {
		if data[i+1] == 0xda {
			return append(out, data[i:]...)
		}
		n := int(data[i+2])<<8 | int(data[i+3])
		if data[i+1] != m {
			out = append(out, data[i:i+2+n]...)
		}
		i += 2 + n
	}
	return out
}

// TestNoStateAcrossImages checks that a decode does not depend on what the
// Decompressor decoded before: libjpeg keeps DQT and DHT tables in the
// instance (see reset).
func TestNoStateAcrossImages(t *testing.T) {
	l := loadOrSkip(t)
	a := encode(t, photo(64, 48, false, 1), 20)
	// aOddDHT has a valid but different first Huffman table (two symbols
	// swapped), so it stays in the instance.
	aOddDHT := bytes.Clone(a)
	i := bytes.Index(aOddDHT, []byte{0xff, 0xc4}) + 5 + 16
	aOddDHT[i+1], aOddDHT[i+2] = aOddDHT[i+2], aOddDHT[i+1]
	b := encode(t, photo(64, 48, false, 2), 95)
	for _, c := range []struct {
		name          string
		before, after []byte
	}{
		{"no DQT", a, stripSegments(b, 0xdb)},       // fails on a fresh instance
		{"no DHT", aOddDHT, stripSegments(b, 0xc4)}, // standard tables on a fresh instance
		{"complete", aOddDHT, b},
	} {
		t.Run(c.name, func(t *testing.T) {
			fresh, err := l.NewDecompressor()
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			want := make([]byte, 3*64*48)
			_, _, wantErr := fresh.DecodeRGB(want, c.after, 1, 1)

			d := newDecompressor(t)
			got := make([]byte, len(want))
			d.DecodeRGB(got, c.before, 1, 1)
			d.Header(c.before)
			_, _, err = d.DecodeRGB(got, c.after, 1, 1)
			if (err == nil) != (wantErr == nil) || err == nil && !bytes.Equal(got, want) {
				t.Errorf("after another image: err %v, same pixels %v; fresh instance: err %v",
					err, bytes.Equal(got, want), wantErr)
			}
		})
	}
}

func TestFrameHeader(t *testing.T) {
	good := encode(t, photo(33, 17, false, 11), 90)
	if w, h, nc, ok := frameHeader(good); !ok || w != 33 || h != 17 || nc != 3 {
		t.Errorf("frameHeader(image/jpeg output) = %d, %d, %d, %v", w, h, nc, ok)
	}
	gray := encode(t, photo(9, 4, true, 12), 90)
	if w, h, nc, ok := frameHeader(gray); !ok || w != 9 || h != 4 || nc != 1 {
		t.Errorf("frameHeader(gray) = %d, %d, %d, %v", w, h, nc, ok)
	}
	sof := bytes.Index(good, []byte{0xff, 0xc0})
	for name, data := range map[string][]byte{
		"empty":     nil,
		"SOI only":  {0xff, 0xd8},
		"cut SOF":   good[:sof+6],
		"junk":      append(append(bytes.Clone(good[:sof]), 0), good[sof:]...),
		"lossless":  append(append(bytes.Clone(good[:sof]), 0xff, 0xc3), good[sof+2:]...),
		"zero size": append(append(bytes.Clone(good[:sof+5]), 0, 0, 0, 0), good[sof+9:]...),
	} {
		if w, h, nc, ok := frameHeader(data); ok {
			t.Errorf("%s: frameHeader = %d, %d, %d, true; want !ok", name, w, h, nc)
		}
	}
}

// FuzzDecodeRGB checks that arbitrary input never crashes the process and
// that a successful decode has the size the header promised.
func FuzzDecodeRGB(f *testing.F) {
	f.Add(encode(f, photo(1, 1, false, 1), 90))
	f.Add(encode(f, photo(33, 17, false, 2), 50))
	f.Add(encode(f, photo(16, 24, true, 3), 90))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xd9})
	d := newDecompressor(f)
	const maxPixels = 1 << 20
	dst := make([]byte, 3*maxPixels)
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, _, _, err := d.Header(data)
		// DecodeRGB trusts frameHeader's size; it must be libjpeg's.
		if fw, fh, _, ok := frameHeader(data); ok && err == nil && (fw != w || fh != h) {
			t.Fatalf("frameHeader says %dx%d, tjDecompressHeader3 %dx%d", fw, fh, w, h)
		}
		if err != nil || w <= 0 || h <= 0 || w*h > maxPixels {
			// Bound the work: libjpeg allocates per the declared size.
			if w > 0 && h > 0 && w*h <= maxPixels {
				d.DecodeRGB(dst, data, 1, 1) // header error: must fail, not crash
			}
			return
		}
		for _, sf := range [][2]int{{1, 1}, {1, 8}} {
			gw, gh, err := d.DecodeRGB(dst, data, sf[0], sf[1])
			if err != nil {
				continue
			}
			if ww, wh := ScaledSize(w, h, sf[0], sf[1]); gw != ww || gh != wh {
				t.Fatalf("decoded %dx%d at %d/%d, header says %dx%d -> %dx%d", gw, gh, sf[0], sf[1], w, h, ww, wh)
			}
		}
	})
}

// TestDecodeYUV checks the planes against the RGB decode: converted with nearest
// chroma, they match the RGB decode with TJFLAG_FASTUPSAMPLE within rounding at full
// scale. At reduced scales the RGB decode computes chroma at a larger DCT scale than the
// raw planes hold (their chroma stays at half the scaled luma), so there only the mean
// is bounded; the decode package's DCT-scaling tests judge the result end to end.
func TestDecodeYUV(t *testing.T) {
	d := newDecompressor(t)
	data := encode(t, photo(333, 251, false, 2), 90)
	for _, f := range [][2]int{{1, 1}, {1, 2}, {1, 4}, {1, 8}} {
		var bufs [3][]byte
		grow := func(i, n int) []byte {
			if cap(bufs[i]) < n {
				bufs[i] = make([]byte, n)
			}
			return bufs[i][:n]
		}
		planes, w, h, sub, err := d.DecodeYUV(data, f[0], f[1], grow)
		if err != nil {
			t.Fatal(err)
		}
		if ww, wh := ScaledSize(333, 251, f[0], f[1]); w != ww || h != wh || sub != SAMP420 {
			t.Fatalf("%d/%d: %dx%d subsampling %d", f[0], f[1], w, h, sub)
		}
		rgb := make([]byte, 3*w*h)
		if _, _, err := d.decode(rgb, data, f[0], f[1], decodeFlags|flagFastUpsample); err != nil {
			t.Fatal(err)
		}
		yw, _ := PlaneSize(0, w, h, sub)
		cw, _ := PlaneSize(1, w, h, sub)
		worst, sum := 0, 0
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				r, g, b := color.YCbCrToRGB(planes[0][y*yw+x], planes[1][y/2*cw+x/2], planes[2][y/2*cw+x/2])
				for c, v := range []uint8{r, g, b} {
					dv := int(v) - int(rgb[3*(y*w+x)+c])
					worst, sum = max(worst, dv, -dv), sum+max(dv, -dv)
				}
			}
		}
		mean := float64(sum) / float64(3*w*h)
		if f[1] == 1 && worst > 2 || mean > 6 {
			t.Errorf("%d/%d: planes converted differ from the RGB decode by up to %d, mean %.2f", f[0], f[1], worst, mean)
		}
	}
	if _, _, _, _, err := d.DecodeYUV(encode(t, photo(40, 30, true, 1), 90), 1, 1, func(i, n int) []byte { return make([]byte, n) }); err != nil {
		t.Errorf("greyscale: %v", err)
	}
}
