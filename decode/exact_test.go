package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"os"
	"testing"
)

// TestResizeExactPillow compares Resizer.Exact with Pillow's
// Image.crop(box).resize(size, BILINEAR), as testdata/pillow_resize.py recorded it:
// every byte must match, for shrinking, enlarging, one-axis and one-pixel cases.
func TestResizeExactPillow(t *testing.T) {
	data, err := os.ReadFile("testdata/pillow_resize.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Pillow        string
		Width, Height int
		Source        string
		Cases         []struct {
			Box    [4]int
			Size   [2]int
			Pixels string
		}
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	pix, err := base64.StdEncoding.DecodeString(g.Source)
	if err != nil {
		t.Fatal(err)
	}
	// A stride wider than the rows, so that reading outside the crop would show.
	src := &Image{Width: g.Width, Height: g.Height, Stride: 3*g.Width + 5}
	src.Pix = make([]uint8, src.Stride*g.Height)
	for y := range g.Height {
		copy(src.Row(y), pix[3*g.Width*y:3*g.Width*(y+1)])
	}
	var z Resizer
	z.Exact = true
	var dst Image
	for _, c := range g.Cases {
		r := image.Rect(c.Box[0], c.Box[1], c.Box[2], c.Box[3])
		want, err := base64.StdEncoding.DecodeString(c.Pixels)
		if err != nil {
			t.Fatal(err)
		}
		got, err := z.Resize(&dst, src, r, c.Size[0], c.Size[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Pix, want) {
			n, worst := 0, 0
			for i := range want {
				if d := abs(int(got.Pix[i]) - int(want[i])); d > 0 {
					n++
					worst = max(worst, d)
				}
			}
			t.Errorf("%v -> %dx%d: %d of %d samples differ from Pillow %s, by up to %d", r, c.Size[0], c.Size[1], n, len(want), g.Pillow, worst)
		}
	}
}

// BenchmarkResizeExact measures Resizer.Exact on BenchmarkResize's cases.
func BenchmarkResizeExact(b *testing.B) {
	crop := image.Rect(100, 50, 400, 300)
	b.Run("500x375-crop-224", func(b *testing.B) { benchResizer(b, true, 500, 375, crop, 224, 224) })
	b.Run("1920x1080-455x256", func(b *testing.B) { benchResizer(b, true, 1920, 1080, image.Rectangle{}, 455, 256) })
}

// TestResizeExactAllocs checks that a warm exact Resizer allocates nothing.
func TestResizeExactAllocs(t *testing.T) {
	src := &Image{}
	src.Reset(500, 375)
	z := Resizer{Exact: true}
	var dst Image
	r := image.Rect(100, 50, 400, 300)
	z.Resize(&dst, src, r, 224, 224)
	if n := testing.AllocsPerRun(20, func() { z.Resize(&dst, src, r, 224, 224) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}
