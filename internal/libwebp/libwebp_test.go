package libwebp

import (
	"bytes"
	"image/color"
	"image/png"
	"os"
	"testing"
)

func lib(t *testing.T) *Lib {
	t.Helper()
	l, err := Load()
	if err != nil {
		t.Skipf("libwebp not available, so its decoder cannot be tested: %v", err)
	}
	return l
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/decode/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeMatchesPIL decodes the WebP fixtures and compares with what PIL (libwebp)
// decoded them to: exactly.
func TestDecodeMatchesPIL(t *testing.T) {
	l := lib(t)
	t.Logf("libwebp %s", l.Version())
	for webp, want := range map[string]string{
		"lossy.webp":          "lossy-webp-pil.png",
		"lossy-alpha.webp":    "lossy-alpha-webp-pil.png",
		"lossless.webp":       "gradient.png",
		"lossless-alpha.webp": "gradient-alpha.png",
	} {
		data := read(t, webp)
		w, h, err := l.Info(data)
		if err != nil {
			t.Fatal(err)
		}
		const pad = 5 // a stride wider than the row
		dst := make([]byte, h*(3*w+pad))
		if err := l.DecodeRGB(dst, 3*w+pad, w, h, data); err != nil {
			t.Fatalf("%s: %v", webp, err)
		}
		ref, err := png.Decode(bytes.NewReader(read(t, want)))
		if err != nil {
			t.Fatal(err)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(ref.At(x, y)).(color.NRGBA) // the PNGs are RGB or NRGBA: exact
				p := dst[y*(3*w+pad)+3*x:]
				if p[0] != c.R || p[1] != c.G || p[2] != c.B {
					t.Fatalf("%s: pixel (%d,%d) = %v, PIL %d %d %d", webp, x, y, p[:3], c.R, c.G, c.B)
				}
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	l := lib(t)
	data := read(t, "lossy.webp")
	w, h, err := l.Info(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 3*w*h)
	for name, tc := range map[string]struct {
		data       []byte
		w, h, size int
	}{
		"truncated":   {data[:len(data)/2], w, h, len(dst)},
		"wrong size":  {data, w + 1, h, 3 * (w + 1) * h},
		"small dst":   {data, w, h, len(dst) - 1},
		"empty":       {nil, w, h, len(dst)},
		"not webp":    {read(t, "gradient.png"), w, h, len(dst)},
		"random tail": {append(append([]byte{}, data[:30]...), bytes.Repeat([]byte{0x55}, 200)...), w, h, len(dst)},
	} {
		buf := make([]byte, tc.size)
		if err := l.DecodeRGB(buf, 3*tc.w, tc.w, tc.h, tc.data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeRGB feeds arbitrary bytes to libwebp: no crash, and a success only for the
// size Info reports.
func FuzzDecodeRGB(f *testing.F) {
	for _, n := range []string{"lossy.webp", "lossless.webp", "lossy-alpha.webp", "lossless-alpha.webp"} {
		b, err := os.ReadFile("../../testdata/decode/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	l, err := Load()
	if err != nil {
		f.Skipf("libwebp not available: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, err := l.Info(data)
		if err != nil || int64(w)*int64(h) > 1<<20 {
			return
		}
		dst := make([]byte, 3*w*h)
		_ = l.DecodeRGB(dst, 3*w, w, h, data)
	})
}
