// Package decodetest makes decode.Image values for tests of the packages that consume
// them (augment, pack): random pixels, and rows padded past their width.
package decodetest

import (
	"math/rand/v2"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// Noise returns a width×height image of uniformly random pixels, covering every colour
// region (saturated, dark, grey) that smooth photos rarely reach.
func Noise(seed uint64, width, height int) *decode.Image {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &decode.Image{}
	m.Reset(width, height)
	for i := range m.Pix {
		m.Pix[i] = uint8(r.UintN(256))
	}
	return m
}

// WithStride returns a copy of m whose rows are pad bytes longer than needed, the padding
// filled with a marker so that reading or writing it shows.
func WithStride(m *decode.Image, pad int) *decode.Image {
	s := 3*m.Width + pad
	out := &decode.Image{Pix: make([]uint8, s*m.Height), Width: m.Width, Height: m.Height, Stride: s}
	for i := range out.Pix {
		out.Pix[i] = 0xA5
	}
	for y := range m.Height {
		copy(out.Pix[y*s:], m.Row(y))
	}
	return out
}

// BenchSamples runs sample b.N times and reports images/s; bytes is what one sample
// writes (for MB/s).
func BenchSamples(b *testing.B, bytes int, sample func(i int)) {
	b.Helper()
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sample(i)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
