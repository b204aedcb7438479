package augment

import (
	"testing"

	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// benchOp runs op on a fresh copy of a 224×224 photo per sample, seeded per sample as the
// loader seeds it; the copy (a few µs) is part of the cost.
func benchOp(b *testing.B, op Op) {
	src := photo(b, 1, 224, 224)
	work := clone(src)
	c := NewContext()
	decodetest.BenchSamples(b, 3*224*224, func(i int) {
		c.Seed(1, 0, int64(i))
		copy(work.Pix, src.Pix)
		if _, err := op.Apply(c, work); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkSolarize224(b *testing.B)     { benchOp(b, NewRandomSolarize(128, 1)) }
func BenchmarkPosterize224(b *testing.B)    { benchOp(b, NewRandomPosterize(4, 1)) }
func BenchmarkAutocontrast224(b *testing.B) { benchOp(b, NewRandomAutocontrast(1)) }
func BenchmarkEqualize224(b *testing.B)     { benchOp(b, NewRandomEqualize(1)) }
func BenchmarkInvert224(b *testing.B)       { benchAdjust(b, Invert) }
func BenchmarkSharpness224(b *testing.B)    { benchOp(b, sharpnessOp{}) }
func BenchmarkGaussianBlur3x224(b *testing.B) {
	benchOp(b, NewGaussianBlur(3, 0.1, 2))
}
func BenchmarkGaussianBlur23x224(b *testing.B) {
	benchOp(b, NewGaussianBlur(23, 0.1, 2))
}
func BenchmarkRandAugment224(b *testing.B)        { benchOp(b, NewRandAugment(2, 9)) }
func BenchmarkTrivialAugmentWide224(b *testing.B) { benchOp(b, NewTrivialAugmentWide()) }
func BenchmarkAutoAugment224(b *testing.B)        { benchOp(b, NewAutoAugment(ImageNetPolicy)) }
