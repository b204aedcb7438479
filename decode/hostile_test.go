package decode

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/image/bmp"
)

const hostileDir = fixtures + "/hostile"

// hostileWant says which typed error each file of testdata/decode/hostile must give.
var hostileWant = map[string]error{
	"png-100000x100000.png":                 ErrTooLarge,
	"jpeg-65535x65535.jpg":                  ErrTooLarge,
	"webp-16383x16383.webp":                 ErrTooLarge,
	"png-12000x12000-tiny.png":              errFormat,
	"jpeg-progressive-12000x12000-tiny.jpg": errFormat,
	"gif-screen-12000x12000-tiny.gif":       errFormat,
	"png-zlib-bomb.png":                     errFormat,
	"gif-frame-outside.gif":                 errFormat,
	"random.jpg":                            errAny,
	"random.png":                            errAny,
	"random.gif":                            errAny,
	"random.bmp":                            errAny,
	"random.tiff":                           errAny,
	"random.webp":                           errFormat,
}

// Error classes for hostileWant besides the sentinels.
var (
	errFormat = errors.New("a *FormatError")
	errAny    = errors.New("a *FormatError, ErrUnsupported or ErrTooLarge") // random bytes
)

// hostileHeapBound is the stated bound on what one call may allocate on the Go heap for
// a file from the hostile corpus: 4 MiB plus 16 bytes per pixel of a header that passes
// the Decoder's checks (none for one that fails them). The bound holds for every input;
// the point of the corpus is that its headers claim up to 10^10 pixels while the bound
// stays at a few MiB, because the checks run before any pixel memory is allocated.
func hostileHeapBound(pixels int64) uint64 { return 4<<20 + 16*uint64(pixels) }

func isClass(err, want error) bool {
	var fe *FormatError
	switch want {
	case errFormat:
		return errors.As(err, &fe)
	case errAny:
		return errors.As(err, &fe) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge)
	}
	return errors.Is(err, want)
}

// allocated returns the bytes f allocates on the Go heap. TotalAlloc only grows, so the
// difference bounds the peak heap growth during f (nothing else runs meanwhile: the test
// is not parallel).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestHostileCorpus decodes every file of testdata/decode/hostile through every entry
// point (ReadConfig, Decoder.Config, Decode, DecodeRegion) on both backends: each gives
// its typed error, none panics (a panic would fail the test), and none allocates more than
// hostileHeapBound.
func TestHostileCorpus(t *testing.T) {
	entries, err := os.ReadDir(hostileDir)
	if err != nil {
		t.Fatal(err)
	}
	decoders := map[string]*Decoder{BackendGo: goDecoder(t, Options{})}
	if d, ok := tryTurbo(t); ok {
		decoders[BackendTurbo] = d
	} else {
		t.Log("libjpeg-turbo not available: the corpus runs on the Go backend only")
	}
	seen := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".py") {
			continue
		}
		want, ok := hostileWant[e.Name()]
		if !ok {
			t.Errorf("%s: not in hostileWant; say which error it must give", e.Name())
			continue
		}
		seen++
		data, err := os.ReadFile(filepath.Join(hostileDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadConfig(data); err != nil && !isClass(err, errAny) {
			t.Errorf("%s: ReadConfig: undocumented error %v", e.Name(), err)
		}
		for backend, d := range decoders {
			var cfg Config
			var cerr error
			n := allocated(func() { cfg, cerr = d.Config(data) })
			pixels := int64(0)
			if cerr == nil {
				pixels = int64(cfg.Width) * int64(cfg.Height)
			}
			bound := hostileHeapBound(pixels)
			check := func(call string, err error, n uint64) {
				t.Helper()
				if !isClass(err, want) {
					t.Errorf("%s/%s: %s: got %v, want %v", e.Name(), backend, call, err, want)
				}
				if n > bound {
					t.Errorf("%s/%s: %s allocated %d bytes, bound %d", e.Name(), backend, call, n, bound)
				}
				t.Logf("%s/%s: %s: %d bytes allocated: %v", e.Name(), backend, call, n, err)
			}
			if cerr != nil {
				check("Config", cerr, n)
			}
			var derr error
			n = allocated(func() { _, derr = d.Decode(nil, data) })
			check("Decode", derr, n)
			n = allocated(func() { _, derr = d.DecodeRegion(nil, data, image.Rect(0, 0, 1, 1), 1, 1) })
			check("DecodeRegion", derr, n)
		}
	}
	if seen != len(hostileWant) {
		t.Errorf("%d files in %s, %d in hostileWant", seen, hostileDir, len(hostileWant))
	}
}

// tryTurbo returns a turbo-backend Decoder, or false if libjpeg-turbo cannot be loaded.
func tryTurbo(t *testing.T) (*Decoder, bool) {
	t.Setenv(EnvBackend, "")
	d, err := NewDecoder(&Options{Backend: BackendTurbo})
	if err != nil {
		return nil, false
	}
	t.Cleanup(func() { d.Close() })
	return d, true
}

// TestCapacityAdmitsValidFiles encodes flat images, the most compressible there are, and
// checks that the file-size bound of each format still admits them.
func TestCapacityAdmitsValidFiles(t *testing.T) {
	const w, h = 2000, 1500
	gray := image.NewGray(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(gray.Rect, color.Palette{color.Black, color.White})
	enc := func(f func(*bytes.Buffer) error) []byte {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	files := map[string][]byte{
		"png-gray": enc(func(b *bytes.Buffer) error {
			return (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(b, gray)
		}),
		"png-1bit": enc(func(b *bytes.Buffer) error {
			return (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(b, pal)
		}),
		"jpeg":     enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, &jpeg.Options{Quality: 1}) }),
		"gif":      enc(func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }),
		"bmp-gray": enc(func(b *bytes.Buffer) error { return bmp.Encode(b, gray) }),
	}
	d := goDecoder(t, Options{})
	for name, data := range files {
		hd, err := readHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decode(nil, data); err != nil {
			t.Errorf("%s (%d bytes): %v", name, len(data), err)
		}
		need, have, unit := fileBound(hd, data)
		t.Logf("%s: %d bytes claim %d %s, bound %d", name, len(data), need, unit, have)
	}
}

// A progressive JPEG of thousands of tiny scans is a CPU bomb: each scan revisits the
// whole image. Both backends refuse one with more than MaxScans scans before decoding.
func TestScanLimit(t *testing.T) {
	base, err := os.ReadFile("../testdata/decode/progressive.jpg")
	if err != nil {
		t.Fatal(err)
	}
	eoi := bytes.LastIndex(base, []byte{0xff, 0xd9})
	// A DC refinement scan of the first component with one byte of data, repeated.
	scan := []byte{0xff, 0xda, 0, 8, 1, 1, 0, 0, 0, 0x10, 0x00}
	for _, n := range []int{MaxScans / 2, 20000} {
		bomb := append(append(slices.Clone(base[:eoi]), bytes.Repeat(scan, n)...), 0xff, 0xd9)
		for _, backend := range []string{BackendAuto, BackendGo} {
			d, err := NewDecoder(&Options{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = d.Decode(nil, bomb)
			d.Close()
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("%d scans on %s: %v", n, backend, took)
			}
			if n > MaxScans {
				var fe *FormatError
				if !errors.Is(err, ErrTooManyScans) || !errors.As(err, &fe) {
					t.Errorf("%d scans on %s: %v; want a *FormatError wrapping ErrTooManyScans", n, backend, err)
				}
			} else if errors.Is(err, ErrTooManyScans) {
				t.Errorf("%d scans on %s refused as too many", n, backend)
			}
		}
	}
}
