package libjpeg

import (
	"errors"
	"image"
	"testing"
)

// FuzzDecodeRaw: any bytes and any row count decode or fail with an error (libjpeg's
// errors come back through the trampoline), and a decode that succeeds covers the rows
// asked for with whole iMCU rows inside the image.
func FuzzDecodeRaw(f *testing.F) {
	d := newDecoder(f)
	for _, name := range []string{"sequential/sample-2x2.jpg", "sequential/restart.jpg", "sequential/gray.jpg", "truncated.jpg", "corrupt.jpg"} {
		f.Add(read(f, name), 20)
	}
	f.Add(encode(f, texture(40, 24, 1), 50), 0)
	f.Add(encode(f, image.NewGray(image.Rect(0, 0, 9, 33)), 50), 17)
	f.Fuzz(func(t *testing.T, data []byte, rows int) {
		p, err := d.DecodeRaw(data, rows, planesGrow())
		if err != nil {
			if e := (*Error)(nil); !errors.As(err, &e) && !errors.Is(err, ErrUnsupported) {
				t.Logf("%v", err) // a size the library disagrees with: still an error
			}
			return
		}
		need := rows
		if rows <= 0 || rows > p.Height {
			need = p.Height
		}
		if p.Rows < need || p.Rows > p.Height || p.Rows < p.Height && p.Rows%(8*p.V[0]) != 0 {
			t.Fatalf("%dx%d asked %d rows: decoded %d (iMCU rows of %d)", p.Width, p.Height, rows, p.Rows, 8*p.V[0])
		}
		for i := range p.Comps {
			if len(p.Pix[i]) < (p.Rows*p.V[i]+p.V[0]-1)/p.V[0]*p.Stride[i] || p.Stride[i] < (p.Width*p.H[i]+p.H[0]-1)/p.H[0] {
				t.Fatalf("plane %d: %d bytes, stride %d, for %d rows of %dx%d", i, len(p.Pix[i]), p.Stride[i], p.Rows, p.Width, p.Height)
			}
		}
	})
}
