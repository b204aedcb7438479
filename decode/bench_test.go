package decode

import (
	"bytes"
	"image/jpeg"
	"testing"
)

// benchDecode measures decoding a w×h JPEG with the given backend and resize policy.
func benchDecode(b *testing.B, backend string, w, h int, p ResizePolicy) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo(w, h), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	var d *Decoder
	if backend == BackendTurbo {
		d = turboDecoder(b, Options{Resize: p})
	} else {
		d = goDecoder(b, Options{Resize: p})
	}
	var dst Image
	if _, err := d.Decode(&dst, buf.Bytes()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(3 * w * h))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Decode(&dst, buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

func BenchmarkDecode(b *testing.B) {
	s256 := ResizePolicy{Mode: ResizeShorter, Size: 256}
	b.Run("jpeg-500x375/go", func(b *testing.B) { benchDecode(b, BackendGo, 500, 375, ResizePolicy{}) })
	b.Run("jpeg-500x375/turbo", func(b *testing.B) { benchDecode(b, BackendTurbo, 500, 375, ResizePolicy{}) })
	b.Run("jpeg-500x375-shorter256/go", func(b *testing.B) { benchDecode(b, BackendGo, 500, 375, s256) })
	b.Run("jpeg-500x375-shorter256/turbo", func(b *testing.B) { benchDecode(b, BackendTurbo, 500, 375, s256) })
	b.Run("jpeg-1920x1080-shorter256/go", func(b *testing.B) { benchDecode(b, BackendGo, 1920, 1080, s256) })
	b.Run("jpeg-1920x1080-shorter256/turbo", func(b *testing.B) { benchDecode(b, BackendTurbo, 1920, 1080, s256) })
}
