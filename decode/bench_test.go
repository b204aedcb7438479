package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"testing"
)

// benchDecode measures decoding a w×h JPEG with the given backend and resize policy.
func benchDecode(b *testing.B, backend string, w, h int, p ResizePolicy) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo(w, h), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	benchDecodeData(b, backend, buf.Bytes(), p)
}

// benchDecodeData measures decoding data with the given backend and resize policy.
func benchDecodeData(b *testing.B, backend string, data []byte, p ResizePolicy) {
	buf := bytes.NewBuffer(data)
	cfg, err := ReadConfig(data)
	if err != nil {
		b.Fatal(err)
	}
	w, h := cfg.Width, cfg.Height
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
	// Real photos (testdata/decode/photos), whole: the Go path upsamples chroma.
	for _, f := range []string{"seeding-800x599-420", "ladybird-333x500-422"} {
		b.Run("photo-"+f+"/go", func(b *testing.B) { benchDecodeData(b, BackendGo, photoFixture(b, f+".jpg"), ResizePolicy{}) })
	}
}

// BenchmarkJPEGPlanes compares the JPEG decoders alone, to YCbCr planes: image/jpeg, the
// pure-Go fast path on the whole image, and on a centred region of half the area (the
// mean crop of RandomResizedCrop), where it skips the inverse DCT of blocks outside.
func BenchmarkJPEGPlanes(b *testing.B) {
	for _, sz := range []image.Point{{500, 375}, {1920, 1080}} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo(sz.X, sz.Y), &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		name := fmt.Sprintf("%dx%d", sz.X, sz.Y)
		whole := image.Rect(0, 0, sz.X, sz.Y)
		dx, dy := int(float64(sz.X)*0.707), int(float64(sz.Y)*0.707)
		half := image.Rect((sz.X-dx)/2, (sz.Y-dy)/2, (sz.X+dx)/2, (sz.Y+dy)/2)
		run := func(b *testing.B, f func() error) {
			b.SetBytes(int64(3 * sz.X * sz.Y))
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		}
		b.Run(name+"/image-jpeg", func(b *testing.B) {
			run(b, func() error { _, err := jpeg.Decode(bytes.NewReader(data)); return err })
		})
		var d jpegFast
		b.Run(name+"/fast", func(b *testing.B) {
			run(b, func() error { _, err := d.decode(data, sz.X, sz.Y, whole); return err })
		})
		b.Run(name+"/fast-half-area", func(b *testing.B) {
			run(b, func() error { _, err := d.decode(data, sz.X, sz.Y, half); return err })
		})
	}
}
