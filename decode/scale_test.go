package decode

import (
	"fmt"
	"image"
	"math"
	"testing"
)

// photoFixture returns the bytes of testdata/decode/photos/name, a real photograph (see
// the README there).
func photoFixture(t testing.TB, name string) []byte {
	t.Helper()
	return fixture(t, "photos/"+name)
}

// TestDCTScaleNoShift decodes real photos whose sides are not multiples of 8 at each DCT
// scale below 1 (1/2, 1/4, 1/8), whole and cropped, and compares each with a full-size decode followed
// by the same resize: no sub-pixel shift (under 0.03 output pixels, over the image and
// over its far quarter, where stretching the scaled image over the source would show
// most), and a PSNR of at least 45 dB. A scaled decode at M/8 has ceil(n·M/8) pixels but
// only n·M/8 of them hold the image; mapping the crop as if all of them did moves the
// output by up to a third of a pixel.
func TestDCTScaleNoShift(t *testing.T) {
	type tc struct {
		file string
		r    image.Rectangle // empty: the whole image, resized with policy
		p    ResizePolicy
		w, h int // the region's output size
	}
	var cases []tc
	// The scales in the comments are those of the sizes 800×599 and 333×500.
	for _, f := range []string{"seeding-800x599-420.jpg", "seeding-800x599-422.jpg"} {
		cases = append(cases,
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 150}}, // 1/2: 400×300 for 400×299.5
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 100}}, // 1/2
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 40}},  // 1/4
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 25}},  // 1/8
			tc{file: f, r: image.Rect(101, 57, 701, 554), w: 112, h: 112},
			tc{file: f, r: image.Rect(3, 13, 800, 599), w: 150, h: 96},
			tc{file: f, r: image.Rect(250, 0, 539, 599), w: 70, h: 140})
	}
	for _, f := range []string{"friends-333x500-420.jpg", "ladybird-333x500-422.jpg"} {
		cases = append(cases,
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 64}}, // 1/2: 167×250 for 166.5×250
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 40}}, // 1/2 (1/4 would be 2.1 times)
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 25}}, // 1/4
			tc{file: f, p: ResizePolicy{Mode: ResizeShorter, Size: 14}}, // 1/8
			tc{file: f, r: image.Rect(17, 29, 333, 461), w: 72, h: 96})
	}
	full := turboDecoder(t, Options{})
	var rs Resizer
	for _, c := range cases {
		name := fmt.Sprintf("%s/%v", c.file, c.p)
		if !c.r.Empty() {
			name = fmt.Sprintf("%s/%v->%dx%d", c.file, c.r, c.w, c.h)
		}
		t.Run(name, func(t *testing.T) {
			data := photoFixture(t, c.file)
			ref, err := full.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			r, w, h := c.r, c.w, c.h
			d := turboDecoder(t, Options{Resize: c.p})
			var got *Image
			if r.Empty() {
				r = image.Rect(0, 0, ref.Width, ref.Height)
				w, h = c.p.OutputSize(ref.Width, ref.Height)
				got, err = d.Decode(nil, data)
			} else {
				got, err = d.DecodeRegion(nil, data, r, w, h)
			}
			if err != nil {
				t.Fatal(err)
			}
			num, denom := d.turbo.scale(r.Dx(), r.Dy(), w, h)
			if num == denom {
				t.Fatalf("%v -> %dx%d is not DCT-scaled; the case tests nothing", r, w, h)
			}
			want, err := rs.Resize(new(Image), ref, r, w, h)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != want.Width || got.Height != want.Height {
				t.Fatalf("%dx%d, want %dx%d", got.Width, got.Height, want.Width, want.Height)
			}
			_, psnr := stats(got, want)
			dx, dy := imageShift(got, want, image.Rect(0, 0, w, h))
			fx, fy := imageShift(got, want, image.Rect(w/2, h/2, w, h))
			t.Logf("scale %d/%d: PSNR %.1f dB, shift (%+.3f, %+.3f), far quarter (%+.3f, %+.3f)", num, denom, psnr, dx, dy, fx, fy)
			const maxShift = 0.03
			if max(math.Abs(dx), math.Abs(dy), math.Abs(fx), math.Abs(fy)) > maxShift {
				t.Errorf("shifted by (%+.3f, %+.3f) pixels, (%+.3f, %+.3f) in the far quarter; want under %.2f",
					dx, dy, fx, fy, maxShift)
			}
			if psnr < 45 {
				t.Errorf("PSNR %.1f dB, want at least 45", psnr)
			}
		})
	}
}

// imageShift estimates the translation (dx, dy), in pixels, that moves b onto a within
// the rectangle r (a ≈ b shifted right by dx and down by dy), from the intensity
// gradients: the least-squares solution of a − b = −dx·∂b/∂x − dy·∂b/∂y over r, with the
// gradients of (a+b)/2, which is exact to first order for shifts well below a pixel
// (about 0.005 pixels of noise on photos).
func imageShift(a, b *Image, r image.Rectangle) (dx, dy float64) {
	lum := func(m *Image, x, y int) float64 {
		p := m.Row(y)[3*x:]
		return float64(p[0]) + float64(p[1]) + float64(p[2])
	}
	mid := func(x, y int) float64 { return (lum(a, x, y) + lum(b, x, y)) / 2 }
	var sxx, sxy, syy, sxd, syd float64
	for y := max(r.Min.Y, 1); y < min(r.Max.Y, a.Height-1); y++ {
		for x := max(r.Min.X, 1); x < min(r.Max.X, a.Width-1); x++ {
			gx := (mid(x+1, y) - mid(x-1, y)) / 2
			gy := (mid(x, y+1) - mid(x, y-1)) / 2
			d := lum(a, x, y) - lum(b, x, y)
			sxx += gx * gx
			sxy += gx * gy
			syy += gy * gy
			sxd += gx * d
			syd += gy * d
		}
	}
	det := sxx*syy - sxy*sxy
	if det == 0 {
		return 0, 0
	}
	// [sxx sxy; sxy syy]·(dx, dy) = −(sxd, syd)
	dx = -(syy*sxd - sxy*syd) / det
	dy = -(sxx*syd - sxy*sxd) / det
	return dx, dy
}
