package decode

import (
	"image"
	"image/color"
	"math/rand/v2"
	"testing"
)

// TestConvert checks every dedicated conversion loop against refRGB, on odd sizes and
// with sub-images whose rows do not start at the buffer's start.
func TestConvert(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	fill := func(b []uint8) {
		for i := range b {
			b[i] = uint8(rng.IntN(256))
		}
	}
	const w, h = 13, 7
	r := image.Rect(0, 0, w, h)
	var cases []struct {
		name string
		m    image.Image
	}
	add := func(name string, m image.Image) {
		cases = append(cases, struct {
			name string
			m    image.Image
		}{name, m})
	}
	for _, ratio := range []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	} {
		m := image.NewYCbCr(r, ratio)
		fill(m.Y)
		fill(m.Cb)
		fill(m.Cr)
		add("ycbcr-"+ratio.String(), m)
		// An odd origin takes the per-pixel path.
		add("ycbcr-sub-"+ratio.String(), m.SubImage(image.Rect(1, 1, w, h)))
	}
	ya := image.NewNYCbCrA(r, image.YCbCrSubsampleRatio420)
	fill(ya.Y)
	fill(ya.Cb)
	fill(ya.Cr)
	fill(ya.A)
	add("nycbcra", ya)
	gray := image.NewGray(r)
	fill(gray.Pix)
	add("gray", gray)
	g16 := image.NewGray16(r)
	fill(g16.Pix)
	add("gray16", g16)
	nrgba := image.NewNRGBA(r)
	fill(nrgba.Pix)
	add("nrgba", nrgba)
	add("nrgba-sub", nrgba.SubImage(image.Rect(2, 1, 9, 6)))
	n64 := image.NewNRGBA64(r)
	fill(n64.Pix)
	add("nrgba64", n64)
	// Valid premultiplied data: channels no larger than alpha, and some alpha 0 and 255.
	rgba := image.NewRGBA(r)
	for i := 0; i < len(rgba.Pix); i += 4 {
		a := []uint8{0, 255, uint8(rng.IntN(256))}[rng.IntN(3)]
		for c := 0; c < 3; c++ {
			rgba.Pix[i+c] = uint8(rng.IntN(int(a) + 1))
		}
		rgba.Pix[i+3] = a
	}
	add("rgba", rgba)
	r64 := image.NewRGBA64(r)
	for i := 0; i < len(r64.Pix); i += 8 {
		a := []uint16{0, 0xffff, uint16(rng.IntN(1 << 16))}[rng.IntN(3)]
		for c := 0; c < 3; c++ {
			v := uint16(rng.IntN(int(a) + 1))
			r64.Pix[i+2*c], r64.Pix[i+2*c+1] = uint8(v>>8), uint8(v)
		}
		r64.Pix[i+6], r64.Pix[i+7] = uint8(a>>8), uint8(a)
	}
	add("rgba64", r64)
	cmyk := image.NewCMYK(r)
	fill(cmyk.Pix)
	add("cmyk", cmyk)
	pal := color.Palette{color.RGBA{10, 20, 30, 255}, color.NRGBA{200, 100, 50, 0}, color.RGBA{40, 20, 10, 128}, color.Gray{77}}
	pm := image.NewPaletted(r, pal)
	for i := range pm.Pix {
		pm.Pix[i] = uint8(rng.IntN(6)) // 4 and 5 are past the palette: black
	}
	add("paletted", pm)
	alpha := image.NewAlpha(r)
	fill(alpha.Pix)
	add("alpha-generic", alpha)

	var lut [256][3]uint8
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got Image
			toRGB(&got, tc.m, &lut)
			var want *Image
			if tc.name == "paletted" { // At panics on indexes past the palette
				want = paletteRef(pm)
			} else {
				want = refRGB(tc.m)
			}
			sameImage(t, &got, want, 0)
		})
	}
}

// paletteRef converts a paletted image whose indexes may run past its palette.
func paletteRef(m *image.Paletted) *Image {
	out := &Image{}
	out.Reset(m.Rect.Dx(), m.Rect.Dy())
	for i, v := range m.Pix {
		if int(v) < len(m.Palette) {
			c := color.NRGBAModel.Convert(m.Palette[v]).(color.NRGBA)
			out.Pix[3*i], out.Pix[3*i+1], out.Pix[3*i+2] = c.R, c.G, c.B
		}
	}
	return out
}

func TestConvertAllocs(t *testing.T) {
	var lut [256][3]uint8
	var dst Image
	for _, m := range []image.Image{
		image.NewYCbCr(image.Rect(0, 0, 64, 48), image.YCbCrSubsampleRatio420),
		image.NewNRGBA(image.Rect(0, 0, 64, 48)),
		image.NewGray(image.Rect(0, 0, 64, 48)),
		image.NewPaletted(image.Rect(0, 0, 64, 48), color.Palette{color.Black, color.White}),
	} {
		toRGB(&dst, m, &lut)
		if n := testing.AllocsPerRun(10, func() { toRGB(&dst, m, &lut) }); n != 0 {
			t.Errorf("%T: %v allocations per conversion", m, n)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	m := image.NewYCbCr(image.Rect(0, 0, 500, 375), image.YCbCrSubsampleRatio420)
	var lut [256][3]uint8
	var dst Image
	b.SetBytes(3 * 500 * 375)
	for i := 0; i < b.N; i++ {
		toRGB(&dst, m, &lut)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
