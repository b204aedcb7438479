package mixup

import (
	"math/rand/v2"
	"testing"

	"github.com/conveyor-ml/conveyor/pack"
)

// benchPixels mixes a batch of 64 samples of 224×224 in dtype, reporting images/s.
func benchPixels(b *testing.B, dtype pack.DType, p Params) {
	const n, side = 64, 224
	data := make([]byte, n*side*side*3*dtype.Size())
	r := rand.New(rand.NewPCG(1, 1))
	for k := range len(data) / dtype.Size() {
		put(data, k, dtype, float32(r.IntN(256))) // pixel values; normalised-looking for floats
		if dtype != pack.Uint8 {
			put(data, k, dtype, (get(data, k, dtype)/255-0.45)/0.225)
		}
	}
	b.ResetTimer()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := Pixels(data, n, pack.NCHW, dtype, side, side, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "images/s")
}

func BenchmarkMixUpFloat32(b *testing.B)  { benchPixels(b, pack.Float32, Params{Lambda: 0.6}) }
func BenchmarkMixUpFloat16(b *testing.B)  { benchPixels(b, pack.Float16, Params{Lambda: 0.6}) }
func BenchmarkMixUpBFloat16(b *testing.B) { benchPixels(b, pack.BFloat16, Params{Lambda: 0.6}) }
func BenchmarkMixUpUint8(b *testing.B)    { benchPixels(b, pack.Uint8, Params{Lambda: 0.6}) }
func BenchmarkCutMixFloat32(b *testing.B) {
	benchPixels(b, pack.Float32, cutBox(0.5, 224, 224, 100, 120))
}
