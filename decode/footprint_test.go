package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"runtime"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// pattern returns a w×h image with smooth gradients and a little texture, filled
// directly so that tens of megapixels take a fraction of a second.
func pattern(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		row := m.Pix[y*m.Stride : y*m.Stride+4*w]
		for x := range w {
			p := row[4*x : 4*x+4 : 4*x+4]
			p[0] = uint8(x*255/w) ^ uint8((x*7+y*13)&15)
			p[1] = uint8(y * 255 / h)
			p[2] = uint8((x + y) >> 4)
			p[3] = 255
		}
	}
	return m
}

// bigJPEG is an 8000×6000 (48 MP) 4:2:0 JPEG from image/jpeg, made once.
var bigJPEG = sync.OnceValue(func() []byte {
	const w, h = 8000, 6000
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	for y := range h {
		for x := range w {
			m.Y[y*m.YStride+x] = uint8(x*255/w) ^ uint8((x*7+y*13)&15)
		}
	}
	for y := range (h + 1) / 2 {
		for x := range (w + 1) / 2 {
			m.Cb[y*m.CStride+x], m.Cr[y*m.CStride+x] = uint8(2*y*255/h), uint8(x>>5)
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 85}); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// bigPNG is a 5000×7000 (35 MP) RGB PNG, made once.
var bigPNG = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	e := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := e.Encode(&b, pattern(5000, 7000)); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// footprintFiles returns the files TestFootprintBound decodes: the two large ones
// (unless testing.Short) and smaller ones in the layouts and formats whose memory differs.
func footprintFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	enc := func(name string, f func(*bytes.Buffer) error) {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[name] = b.Bytes()
	}
	mid := pattern(1200, 900)
	for _, o := range []synth.JPEGOptions{{}, {Progressive: true}, {Subsample444: true}, {Gray: true}, {Progressive: true, Subsample444: true}} {
		enc("jpeg-"+o.String(), func(b *bytes.Buffer) error { return synth.EncodeJPEG(b, mid, &o) })
	}
	files["jpeg-orient-6"] = withEXIF(files["jpeg-q90 baseline 4:2:0"], binary.LittleEndian, 6, 0)
	files["jpeg-cmyk"] = fixture(t, "cmyk.jpg")
	files["jpeg-non-interleaved"] = fixture(t, "sequential/non-interleaved.jpg")
	gray16 := image.NewGray16(mid.Rect)
	pal := image.NewPaletted(mid.Rect, color.Palette{color.Black, color.White, color.NRGBA{200, 10, 10, 128}})
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i % 3)
		gray16.Pix[2*i] = uint8(i)
	}
	enc("png-rgba", func(b *bytes.Buffer) error {
		n := pattern(1200, 900)
		n.Pix[3] = 7 // not opaque
		return png.Encode(b, n)
	})
	enc("png-gray16", func(b *bytes.Buffer) error { return png.Encode(b, gray16) })
	enc("png-palette", func(b *bytes.Buffer) error { return png.Encode(b, pal) })
	enc("gif", func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) })
	enc("bmp", func(b *bytes.Buffer) error { return bmp.Encode(b, mid) })
	enc("tiff", func(b *bytes.Buffer) error { return tiff.Encode(b, mid, &tiff.Options{Compression: tiff.Deflate}) })
	for _, n := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "transparent.gif"} {
		files[n] = fixture(t, n)
	}
	if !testing.Short() && !raceEnabled {
		files["jpeg-8000x6000"] = bigJPEG()
		files["png-5000x7000"] = bigPNG()
	}
	return files
}

// TestFootprintBound decodes large and varied images with fresh Decoders on every
// backend, whole (with and without a resize policy) and by region, and checks that
// Footprint bounds the bytes each decode allocates.
func TestFootprintBound(t *testing.T) {
	files := footprintFiles(t)
	type backendCase struct {
		name string
		opts Options
	}
	backends := []backendCase{{"go", Options{Backend: BackendGo}}, {"go-exact", Options{Backend: BackendGo, Exact: true}}}
	t.Setenv(EnvBackend, "")
	if d, err := NewDecoder(&Options{Backend: BackendTurbo}); err == nil {
		d.Close()
		backends = append(backends, backendCase{"native", Options{Backend: BackendTurbo}}, backendCase{"native-exact", Options{Backend: BackendTurbo, Exact: true}})
	}
	policies := []ResizePolicy{{}, {Mode: ResizeShorter, Size: 256}}
	for _, be := range backends {
		for name, data := range files {
			cfg, err := ReadConfig(data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			W, H := cfg.Width, cfg.Height
			regions := []struct {
				r    image.Rectangle
				w, h int
			}{
				{image.Rect(W/8, H/8, W*7/8+1, H*7/8+1), 224, 224}, // a large crop
				{image.Rect(W/3, H/4, W/3+W/10+1, H/4+H/10+1), 224, 224},
				{image.Rect(0, 0, min(W, 40), min(H, 30)), 224, 224}, // enlarged
			}
			if W*H > 1<<24 { // the large files: enough to see the scales, and faster
				regions = regions[:1]
			}
			check := func(label string, o Options, r image.Rectangle, w, h int, decode func(*Decoder) error) {
				d, err := NewDecoder(&o)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				bound, err := d.Footprint(data, r, w, h)
				if err != nil {
					t.Fatalf("%s: Footprint: %v", label, err)
				}
				runtime.GC()
				got := int64(allocated(func() { err = decode(d) }))
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if got > bound {
					t.Errorf("%s: allocated %d bytes, Footprint says at most %d", label, got, bound)
				}
				if testing.Verbose() {
					t.Logf("%s: allocated %.1f MB, bound %.1f MB (header %.1f MB), margin %d", label, float64(got)/1e6, float64(bound)/1e6, float64(10*W*H)/1e6, bound-got)
				}
			}
			for _, p := range policies {
				o := be.opts
				o.Resize = p
				check(fmt.Sprintf("%s/%s/Decode %v", be.name, name, p), o, image.Rectangle{}, 0, 0, func(d *Decoder) error {
					_, err := d.Decode(nil, data)
					return err
				})
			}
			for _, rg := range regions {
				check(fmt.Sprintf("%s/%s/DecodeRegion %v to %dx%d", be.name, name, rg.r, rg.w, rg.h), be.opts, rg.r, rg.w, rg.h, func(d *Decoder) error {
					_, err := d.DecodeRegion(nil, data, rg.r, rg.w, rg.h)
					return err
				})
			}
		}
	}
}

// TestFootprintShrinks checks that the estimate follows DCT scaling and resize-first: a
// 48 MP JPEG resized to a shorter side of 256 on the turbo backend needs a small fraction
// (a fortieth) of the 10 bytes a pixel the loader used to reserve.
func TestFootprintShrinks(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("encodes a 48 MP JPEG")
	}
	data := bigJPEG()
	const pixels = 8000 * 6000
	s256 := ResizePolicy{Mode: ResizeShorter, Size: 256}
	turbo := turboDecoder(t, Options{Resize: s256})
	n, err := turbo.Footprint(data, image.Rectangle{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n > 10*pixels/40 {
		t.Errorf("turbo, shorter side 256: %d bytes, want far below 10*W*H = %d", n, 10*pixels)
	}
	region, err := turbo.Footprint(data, image.Rect(1000, 1000, 5000, 4000), 224, 224)
	if err != nil {
		t.Fatal(err)
	}
	if region > 10*pixels/40 {
		t.Errorf("turbo, region to 224x224: %d bytes", region)
	}
	// The Go backend holds the 4:2:0 planes at full size (1.5 bytes a pixel), not RGB.
	golang := goDecoder(t, Options{Resize: s256})
	g, err := golang.Footprint(data, image.Rectangle{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g > 2*pixels {
		t.Errorf("go, shorter side 256: %d bytes, want under 2 bytes a pixel", g)
	}
	t.Logf("48 MP JPEG to shorter side 256: turbo %.1f MB, region %.1f MB, go %.1f MB; 10*W*H is %.0f MB",
		float64(n)/1e6, float64(region)/1e6, float64(g)/1e6, 10*pixels/1e6)
	if _, err := turbo.Footprint(data, image.Rect(0, 0, 9000, 10), 10, 10); err == nil {
		t.Error("a region outside the image was accepted")
	}
}

// TestJPEGLayout checks what the footprint reads from JPEG headers.
func TestJPEGLayout(t *testing.T) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, pattern(33, 17), nil); err != nil {
		t.Fatal(err)
	}
	baseline := b.Bytes()
	var p bytes.Buffer
	if err := synth.EncodeJPEG(&p, pattern(33, 17), &synth.JPEGOptions{Progressive: true, Subsample444: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		sof       byte
		ncomp     int
		h0, v0    int
		multiScan bool
		rgb       bool
		blocks    int64
	}{
		{"baseline", baseline, 0xc0, 3, 2, 2, false, false, 3 * 2 * 6},          // 3×2 MCUs of 6 blocks
		{"progressive 4:4:4", p.Bytes(), 0xc2, 3, 1, 1, true, false, 5 * 3 * 3}, // 5×3 MCUs of 3
		{"cmyk", fixture(t, "cmyk.jpg"), 0, 4, 0, 0, false, false, 0},
		{"non-interleaved", fixture(t, "sequential/non-interleaved.jpg"), 0, 3, 0, 0, true, false, 0},
		{"stuffed zero before the frame", append([]byte{0xff, 0xd8, 0xff, 0x00}, baseline[2:]...), 0, 0, 0, 0, true, false, 0},
	} {
		l := readJPEGLayout(tc.data)
		if tc.sof != 0 && (l.sof != tc.sof || l.h[0] != tc.h0 || l.v[0] != tc.v0) {
			t.Errorf("%s: frame %#x, luma %dx%d", tc.name, l.sof, l.h[0], l.v[0])
		}
		if tc.ncomp != 0 && (!l.ok || l.ncomp != tc.ncomp) {
			t.Errorf("%s: ok %v, %d components", tc.name, l.ok, l.ncomp)
		}
		if tc.ncomp == 0 && l.ok {
			t.Errorf("%s: a layout from a walk that gives up", tc.name)
		}
		if l.multiScan() != tc.multiScan || l.rgb != tc.rgb {
			t.Errorf("%s: multi-scan %v, RGB %v", tc.name, l.multiScan(), l.rgb)
		}
		if tc.blocks != 0 && l.blocks(33, 17) != tc.blocks {
			t.Errorf("%s: %d blocks, want %d", tc.name, l.blocks(33, 17), tc.blocks)
		}
	}
}
