package augment

import (
	"github.com/conveyor-ml/conveyor/pack"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// benchOps runs p (then a float32 NCHW normalising Pack) on a fresh copy of a w×h photo
// per sample; the copy is part of the cost, as a decoder's output would be.
func benchOps(b *testing.B, p Pipeline, w, h, outW, outH int) {
	src := photo(b, 1, w, h)
	work := clone(src)
	pk, err := pack.NewPacker(&pack.Options{Width: outW, Height: outH, Normalize: true})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, pk.SampleBytes())
	c := NewContext()
	decodetest.BenchSamples(b, pk.SampleBytes(), func(i int) {
		c.Seed(1, 0, int64(i))
		copy(work.Pix, src.Pix)
		out, err := p.Apply(c, work)
		if err != nil {
			b.Fatal(err)
		}
		if err := pk.Pack(dst, out); err != nil {
			b.Fatal(err)
		}
	})
}

// The standard ImageNet training transform: RandomResizedCrop(224), flip, ToTensor, Normalize.
func BenchmarkTrainStandard500x375(b *testing.B) {
	benchOps(b, Pipeline{NewRandomResizedCrop(224, 224), NewRandomHorizontalFlip(0.5)}, 500, 375, 224, 224)
}

// The heavy one: plus ColorJitter(0.4, 0.4, 0.4, 0.1) and RandomGrayscale(0.2).
func BenchmarkTrainJitter500x375(b *testing.B) { benchOps(b, trainPipeline(), 500, 375, 224, 224) }

// Evaluation: Resize(256), CenterCrop(224).
func BenchmarkEval500x375(b *testing.B) {
	benchOps(b, Pipeline{NewResize(256), NewCenterCrop(224, 224)}, 500, 375, 224, 224)
}

func benchAdjust(b *testing.B, fn func(*decode.Image)) {
	img := photo(b, 2, 224, 224)
	decodetest.BenchSamples(b, 3*224*224, func(int) { fn(img) })
}

func BenchmarkBrightness224(b *testing.B) {
	benchAdjust(b, func(m *decode.Image) { AdjustBrightness(m, 1.01) })
}
func BenchmarkContrast224(b *testing.B) {
	benchAdjust(b, func(m *decode.Image) { AdjustContrast(m, 1.01) })
}
func BenchmarkSaturation224(b *testing.B) {
	benchAdjust(b, func(m *decode.Image) { AdjustSaturation(m, 1.01) })
}
func BenchmarkHue224(b *testing.B)            { benchAdjust(b, func(m *decode.Image) { AdjustHue(m, 0.05) }) }
func BenchmarkGrayscale224(b *testing.B)      { benchAdjust(b, Grayscale) }
func BenchmarkFlipHorizontal224(b *testing.B) { benchAdjust(b, FlipHorizontal) }
func BenchmarkFlipVertical224(b *testing.B)   { benchAdjust(b, FlipVertical) }

// benchOp is in bench_photo_test.go.

func BenchmarkRotateNearest224(b *testing.B) {
	benchOp(b, &RandomRotation{Degrees: [2]float64{-30, 30}})
}
func BenchmarkRotateBilinear224(b *testing.B) {
	benchOp(b, &RandomRotation{Degrees: [2]float64{-30, 30}, Interpolation: Bilinear})
}
func BenchmarkAffineNearest224(b *testing.B) {
	benchOp(b, &RandomAffine{Degrees: [2]float64{-10, 10}, Translate: [2]float64{0.1, 0.1}, Shear: [4]float64{-10, 10, 0, 0}})
}
func BenchmarkPerspectiveBilinear224(b *testing.B) { benchOp(b, NewRandomPerspective(0.5, 1)) }
func BenchmarkRandomCropReflect224(b *testing.B) {
	benchOp(b, &RandomCrop{Width: 224, Height: 224, Padding: [4]int{16, 16, 16, 16}, PaddingMode: PadReflect})
}

func BenchmarkRandomErasing224(b *testing.B) {
	pk, err := pack.NewPacker(&pack.Options{Width: 224, Height: 224, Normalize: true})
	if err != nil {
		b.Fatal(err)
	}
	slot := make([]byte, pk.SampleBytes())
	if err := pk.Pack(slot, photo(b, 4, 224, 224)); err != nil {
		b.Fatal(err)
	}
	for _, random := range []bool{false, true} {
		op := &RandomErasing{P: 1, Random: random}
		name := "value"
		if random {
			name = "random"
		}
		b.Run(name, func(b *testing.B) {
			c := NewContext()
			decodetest.BenchSamples(b, len(slot), func(i int) {
				c.Seed(1, 0, int64(i))
				if err := op.ApplyTensor(c, pk.Sample(slot)); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
