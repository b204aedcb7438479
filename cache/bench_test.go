package cache

import (
	"fmt"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// BenchmarkRead measures a training read of a converted dataset: a ReadOnly cache whose
// shards are mapped, a record of a 256×192 image (about what a resize to shorter side
// 256 stores) or of a 32×32 one (where per-record costs show), read (both checksums)
// and, for Load, decoded into a reused Image.
func BenchmarkRead(b *testing.B) {
	for _, size := range [][2]int{{256, 192}, {32, 32}} {
		for _, codec := range []Codec{Raw, S2} {
			benchmarkRead(b, codec, size[0], size[1])
		}
	}
}

func benchmarkRead(b *testing.B, codec Codec, w, h int) {
	const n = 64
	{
		dir := b.TempDir()
		c := open(b, dir, Options{Codec: codec})
		d := newCoder(b, c)
		for i := range n {
			put(b, d, testKey(i), i, testImage(uint64(i), w, h, false))
		}
		ro := open(b, dir, Options{ReadOnly: true})
		refs := make([]Ref, n)
		for i := range refs {
			refs[i] = mustRef(b, ro, testKey(i))
		}
		rd := newCoder(b, ro)
		// The same records read with pread into a reused buffer, as a writable cache
		// (whose shards are not mapped) reads them.
		b.Run(fmt.Sprintf("Pread/%s/%dx%d", codec, w, h), func(b *testing.B) {
			b.SetBytes(int64(refs[0].Bytes))
			b.ReportAllocs()
			wrefs := make([]Ref, n)
			most := 0
			for i := range wrefs {
				wrefs[i] = mustRef(b, c, testKey(i))
				most = max(most, wrefs[i].Bytes)
			}
			buf := make([]byte, most)
			i := 0
			for b.Loop() {
				if _, err := c.Read(wrefs[i%n], buf); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("Read/%s/%dx%d", codec, w, h), func(b *testing.B) {
			b.SetBytes(int64(refs[0].Bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := ro.Read(refs[i%n], nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("Load/%s/%dx%d", codec, w, h), func(b *testing.B) {
			b.SetBytes(int64(3 * w * h))
			b.ReportAllocs()
			var img decode.Image
			i := 0
			for b.Loop() {
				if _, err := rd.Load(&img, refs[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkPut stores small records (32×32 RGB, raw): the per-record cost of appending,
// including the directory lock and the look at what other writers stored.
func BenchmarkPut(b *testing.B) {
	c, err := Open(b.TempDir(), &Options{Codec: Raw, Logf: func(string, ...any) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	d := c.NewCoder()
	defer d.Close()
	img := &decode.Image{Width: 32, Height: 32, Stride: 96, Pix: make([]byte, 32*32*3)}
	b.SetBytes(int64(len(img.Pix)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := d.Put(Key{Spec: "bench", Path: fmt.Sprintf("p/%d.jpg", i)}, 0, img); err != nil {
			b.Fatal(err)
		}
	}
}
