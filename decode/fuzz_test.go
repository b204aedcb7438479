package decode

import (
	"errors"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fuzz targets, one per entry point: FuzzDecode (Decoder.Decode on both backends),
// FuzzDecodeRegion (Decoder.DecodeRegion) and FuzzConfig (Sniff, ReadConfig and
// Decoder.Config), plus FuzzJPEGFast (jpegfast_test.go) for the pure-Go JPEG path alone.
// Each is seeded with every file in testdata/decode and its hostile/ and sequential/
// corpora. The pixel limit is small so that no input can allocate much, and inputs over
// maxFuzzInput bytes are skipped: instrumented decoding of a large input can take the
// fuzzer minutes per execution, which stalls it without finding anything. Run one with e.g.
//
//	go test -run XXX -fuzz FuzzDecodeRegion -fuzztime 1m ./decode

// maxFuzzInput bounds the inputs the decode fuzz targets try.
const maxFuzzInput = 1 << 20

// fuzzPixels is the decoders' pixel limit in the fuzz targets.
const fuzzPixels = 1 << 18

// addSeeds adds every fixture and hostile file to f's corpus.
func addSeeds(f *testing.F) {
	for _, dir := range []string{fixtures, hostileDir, sequentialDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".md") || strings.HasSuffix(e.Name(), ".py") ||
				strings.HasSuffix(e.Name(), ".sh") || strings.HasSuffix(e.Name(), ".pgm") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// checkError fails unless err is one of the errors Decode documents.
func checkError(t *testing.T, err error) {
	t.Helper()
	var fe *FormatError
	if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) && !errors.As(err, &fe) {
		t.Fatalf("undocumented error %T: %v", err, err)
	}
}

// fuzzDecoders returns decoders with a 1 M pixel limit and policy p: the Go backend, and
// the turbo backend when libjpeg-turbo is present.
func fuzzDecoders(f *testing.F, p ResizePolicy) []*Decoder {
	o := Options{MaxPixels: fuzzPixels, Resize: p}
	ds := []*Decoder{goDecoder(f, o)}
	o.Backend = BackendTurbo
	if d, err := NewDecoder(&o); err == nil && d.Backend() == BackendTurbo {
		f.Cleanup(func() { d.Close() })
		ds = append(ds, d)
	}
	return ds
}

// FuzzDecode feeds arbitrary bytes to Decode. The decoder must never panic, must return
// only its documented errors, and must produce images consistent with its Config, and
// with its resize policy.
func FuzzDecode(f *testing.F) {
	addSeeds(f)
	plain := fuzzDecoders(f, ResizePolicy{})
	small := fuzzDecoders(f, ResizePolicy{Mode: ResizeFit, Width: 17, Height: 13})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("input over maxFuzzInput")
		}
		for i, d := range plain {
			m, err := d.Decode(nil, data)
			if err != nil {
				checkError(t, err)
				continue
			}
			if m.Width <= 0 || m.Height <= 0 || len(m.Pix) != 3*m.Width*m.Height || int64(m.Width)*int64(m.Height) > fuzzPixels {
				t.Fatalf("%s: bad image %dx%d with %d bytes", d.Backend(), m.Width, m.Height, len(m.Pix))
			}
			cfg, err := d.Config(data)
			if err != nil || cfg.Width != m.Width || cfg.Height != m.Height {
				t.Fatalf("%s: Config = %+v, %v; Decode gave %dx%d", d.Backend(), cfg, err, m.Width, m.Height)
			}
			s, err := small[i].Decode(nil, data)
			if err != nil {
				t.Fatalf("%s: decodes at full size but not resized: %v", d.Backend(), err)
			}
			if s.Width > max(17, m.Width) || s.Height > max(13, m.Height) || len(s.Pix) != 3*s.Width*s.Height {
				t.Fatalf("%s: resized to %dx%d", d.Backend(), s.Width, s.Height)
			}
		}
	})
}

// FuzzDecodeRegion feeds arbitrary bytes and regions to DecodeRegion: it must never panic,
// must return its documented errors (or a plain one for a region outside the image), and
// must produce exactly the requested size.
func FuzzDecodeRegion(f *testing.F) {
	addSeeds(f)
	ds := fuzzDecoders(f, ResizePolicy{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("input over maxFuzzInput")
		}
		for _, d := range ds {
			cfg, err := d.Config(data)
			if err != nil {
				checkError(t, err)
				_, err := d.DecodeRegion(nil, data, image.Rect(0, 0, 1, 1), 1, 1)
				checkError(t, err)
				continue
			}
			// A region and output size derived from the data, so the fuzzer steers them.
			var s [6]int
			for i := range s {
				if i < len(data) {
					s[i] = int(data[len(data)-1-i])
				}
			}
			x0, y0 := s[0]%cfg.Width, s[1]%cfg.Height
			r := image.Rect(x0, y0, x0+1+s[2]%(cfg.Width-x0), y0+1+s[3]%(cfg.Height-y0))
			w, h := 1+s[4]%64, 1+s[5]%64
			m, err := d.DecodeRegion(nil, data, r, w, h)
			if err != nil {
				checkError(t, err)
				continue
			}
			if m.Width != w || m.Height != h || len(m.Pix) != 3*w*h {
				t.Fatalf("%s: region %v -> %dx%d gave %dx%d with %d bytes", d.Backend(), r, w, h, m.Width, m.Height, len(m.Pix))
			}
			if _, err := d.DecodeRegion(nil, data, r.Add(image.Pt(cfg.Width, 0)), w, h); err == nil {
				t.Fatalf("%s: region outside the image accepted", d.Backend())
			}
		}
	})
}

// FuzzConfig feeds arbitrary bytes to Sniff, ReadConfig and Decoder.Config: no panics,
// documented errors only, and the three agree.
func FuzzConfig(f *testing.F) {
	addSeeds(f)
	d := goDecoder(f, Options{MaxPixels: fuzzPixels})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("input over maxFuzzInput")
		}
		format := Sniff(data)
		rc, rerr := ReadConfig(data)
		dc, derr := d.Config(data)
		if rerr != nil {
			checkError(t, rerr)
			if derr == nil {
				t.Fatalf("ReadConfig failed (%v) but Decoder.Config did not", rerr)
			}
			if format == "" && !errors.Is(rerr, ErrUnsupported) {
				t.Fatalf("unrecognised bytes gave %v", rerr)
			}
			return
		}
		if rc.Format != format || rc.Width <= 0 || rc.Height <= 0 || rc.Orientation < 1 || rc.Orientation > 8 {
			t.Fatalf("ReadConfig = %+v, Sniff = %q", rc, format)
		}
		if derr != nil {
			checkError(t, derr)
			return
		}
		if dc != rc {
			t.Fatalf("Decoder.Config = %+v, ReadConfig = %+v", dc, rc)
		}
	})
}
