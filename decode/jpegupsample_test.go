package decode

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// upsampleHVRef is h2v2_fancy_upsample as libjpeg-turbo 2.1's jdsample.c writes it: the
// first and last columns special-cased, the rest 3/4 and 1/4 of column sums.
func upsampleHVRef(near, far []uint8) []uint8 {
	n := len(near)
	col := make([]int, n)
	for c := range col {
		col[c] = 3*int(near[c]) + int(far[c])
	}
	out := make([]uint8, 2*n)
	out[0] = uint8((col[0]*4 + 8) >> 4)
	out[1] = uint8((col[0]*3 + col[1] + 7) >> 4)
	for c := 1; c < n-1; c++ {
		out[2*c] = uint8((col[c]*3 + col[c-1] + 8) >> 4)
		out[2*c+1] = uint8((col[c]*3 + col[c+1] + 7) >> 4)
	}
	out[2*n-2] = uint8((col[n-1]*3 + col[n-2] + 8) >> 4)
	out[2*n-1] = uint8((col[n-1]*4 + 7) >> 4)
	return out
}

// TestUpsampleHV checks 4:2:0 chroma upsampling, with and without the AVX2 kernel,
// against libjpeg-turbo's formulas on rows of every width up to 100 (the kernel's
// blocks, their remainder and the edges) with random and extreme samples.
func TestUpsampleHV(t *testing.T) {
	defer func(v bool) { useAVX2 = v }(useAVX2)
	simd := []bool{false}
	if useAVX2 {
		simd = append(simd, true)
	}
	rng := rand.New(rand.NewPCG(29, 30))
	for _, s := range simd {
		useAVX2 = s
		for n := 3; n <= 100; n++ {
			for trial := range 4 {
				near, far := make([]uint8, n), make([]uint8, n)
				for i := range near {
					switch trial {
					case 0:
						near[i], far[i] = 255, 255
					case 1:
						near[i], far[i] = uint8(255*(i&1)), uint8(255*(i>>1&1))
					default:
						near[i], far[i] = uint8(rng.IntN(256)), uint8(rng.IntN(256))
					}
				}
				// A row longer than n around the slices catches a kernel writing
				// past its end.
				buf := make([]uint8, 2*n+64)
				for i := range buf {
					buf[i] = 0xa5
				}
				upsampleHV(buf[:2*n], near, far)
				if want := upsampleHVRef(near, far); !bytes.Equal(buf[:2*n], want) {
					t.Fatalf("AVX2 %v, width %d, trial %d:\n got %v\nwant %v", s, n, trial, buf[:2*n], want)
				}
				for _, v := range buf[2*n:] {
					if v != 0xa5 {
						t.Fatalf("AVX2 %v, width %d: wrote past the row", s, n)
					}
				}
			}
		}
	}
}
