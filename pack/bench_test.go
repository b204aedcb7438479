package pack

import (
	"testing"

	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

func benchPack(b *testing.B, layout Layout, d DType, normalize bool) {
	pk, err := NewPacker(&Options{Width: 224, Height: 224, Layout: layout, DType: d, Normalize: normalize})
	if err != nil {
		b.Fatal(err)
	}
	img := decodetest.Noise(1, 224, 224)
	dst := alignedBytes(pk.SampleBytes(), 0)
	decodetest.BenchSamples(b, pk.SampleBytes(), func(int) {
		if err := pk.Pack(dst, img); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkPackFloat32NCHWNormalize(b *testing.B) { benchPack(b, NCHW, Float32, true) }
func BenchmarkPackFloat32NHWCNormalize(b *testing.B) { benchPack(b, NHWC, Float32, true) }
func BenchmarkPackFloat16NCHWNormalize(b *testing.B) { benchPack(b, NCHW, Float16, true) }
func BenchmarkPackBFloat16NCHW(b *testing.B)         { benchPack(b, NCHW, BFloat16, false) }
func BenchmarkPackUint8NCHW(b *testing.B)            { benchPack(b, NCHW, Uint8, false) }
func BenchmarkPackUint8NHWC(b *testing.B)            { benchPack(b, NHWC, Uint8, false) }
