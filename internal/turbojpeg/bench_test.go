package turbojpeg

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"
)

// benchJPEG is a 500x375 4:2:0 JPEG at quality 90, the size of a typical
// ImageNet sample.
func benchJPEG(b *testing.B) []byte {
	return encode(b, photo(500, 375, false, 42), 90)
}

// benchDecode runs decode b.N times over data and reports images/s; SetBytes
// counts compressed input.
func benchDecode(b *testing.B, data []byte, decode func() error) {
	b.Helper()
	if err := decode(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := decode(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

func benchTurbo(b *testing.B, num, denom int) {
	data := benchJPEG(b)
	d := newDecompressor(b)
	dst := make([]byte, 3*500*375)
	benchDecode(b, data, func() error {
		_, _, err := d.DecodeRGB(dst, data, num, denom)
		return err
	})
}

// benchStd decodes with image/jpeg; toRGB adds the conversion to packed RGB
// that DecodeRGB includes.
func benchStd(b *testing.B, toRGB bool) {
	data := benchJPEG(b)
	dst := make([]byte, 3*500*375)
	benchDecode(b, data, func() error {
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err == nil && toRGB {
			ycbcrToRGB(dst, img.(*image.YCbCr))
		}
		return err
	})
}

// ycbcrToRGB is a plain loop over the planes, the cheapest pure-Go
// conversion short of hand-tuned code.
func ycbcrToRGB(dst []byte, m *image.YCbCr) {
	b := m.Bounds()
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := m.YCbCrAt(x, y)
			r, g, bl := ycbcr(c.Y, c.Cb, c.Cr)
			dst[i], dst[i+1], dst[i+2] = r, g, bl
			i += 3
		}
	}
}

func ycbcr(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy := int32(y) * 0x10101
	cb1, cr1 := int32(cb)-128, int32(cr)-128
	clip := func(v int32) uint8 {
		if uint32(v)&0xff000000 == 0 {
			return uint8(v >> 16)
		}
		return uint8(^(v >> 31))
	}
	return clip(yy + 91881*cr1), clip(yy - 22554*cb1 - 46802*cr1), clip(yy + 116130*cb1)
}

func BenchmarkDecode500x375Turbo(b *testing.B)          { benchTurbo(b, 1, 1) }
func BenchmarkDecode500x375TurboHalf(b *testing.B)      { benchTurbo(b, 1, 2) }
func BenchmarkDecode500x375TurboQuarter(b *testing.B)   { benchTurbo(b, 1, 4) }
func BenchmarkDecode500x375ImageJPEG(b *testing.B)      { benchStd(b, false) }
func BenchmarkDecode500x375ImageJPEGToRGB(b *testing.B) { benchStd(b, true) }

// BenchmarkDecode500x375TurboYUV decodes to planes (no upsampling, no colour
// conversion), against BenchmarkDecode500x375Turbo's packed RGB.
func BenchmarkDecode500x375TurboYUV(b *testing.B) {
	data := benchJPEG(b)
	d := newDecompressor(b)
	var bufs [3][]byte
	grow := func(i, n int) []byte {
		if cap(bufs[i]) < n {
			bufs[i] = make([]byte, n)
		}
		return bufs[i][:n]
	}
	benchDecode(b, data, func() error {
		_, _, _, _, err := d.DecodeYUV(data, 1, 1, grow)
		return err
	})
}
