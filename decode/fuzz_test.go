package decode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder (seeded with every fixture in
// testdata/decode). The pixel limit is small so that no input can allocate much; the
// decoder must never panic, must return only its documented errors, and must produce
// images consistent with ReadConfig.
func FuzzDecode(f *testing.F) {
	entries, err := os.ReadDir(fixtures)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".md") || strings.HasSuffix(e.Name(), ".py") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(fixtures, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	plain := goDecoder(f, Options{MaxPixels: 1 << 20})
	small := goDecoder(f, Options{MaxPixels: 1 << 20, Resize: ResizePolicy{Mode: ResizeFit, Width: 17, Height: 13}})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := plain.Decode(nil, data)
		if err != nil {
			var fe *FormatError
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) && !errors.As(err, &fe) {
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		if m.Width <= 0 || m.Height <= 0 || len(m.Pix) != 3*m.Width*m.Height || int64(m.Width)*int64(m.Height) > 1<<20 {
			t.Fatalf("bad image %dx%d with %d bytes", m.Width, m.Height, len(m.Pix))
		}
		cfg, err := ReadConfig(data)
		if err != nil || cfg.Width != m.Width || cfg.Height != m.Height {
			t.Fatalf("ReadConfig = %+v, %v; Decode gave %dx%d", cfg, err, m.Width, m.Height)
		}
		s, err := small.Decode(nil, data)
		if err != nil {
			t.Fatalf("decodes at full size but not resized: %v", err)
		}
		if s.Width > max(17, m.Width) || s.Height > max(13, m.Height) || len(s.Pix) != 3*s.Width*s.Height {
			t.Fatalf("resized to %dx%d", s.Width, s.Height)
		}
	})
}
