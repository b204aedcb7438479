package decode

import (
	"bytes"
	"image"
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
// blocks, the overlapping block for their remainder, and the edges) with random and
// extreme samples.
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

// gamutSumRef is gamutExcess's sum written plainly: every other chroma sample of every
// other chroma row of r, each with the luma sample at its top-left corner clamped into r.
func gamutSumRef(m *image.YCbCr, r image.Rectangle, hs, vs int) (sum, n int64) {
	for cy := r.Min.Y >> vs; cy <= (r.Max.Y-1)>>vs; cy += 2 {
		for cx := r.Min.X >> hs; cx <= (r.Max.X-1)>>hs; cx += 2 {
			x := min(max(cx<<hs, r.Min.X), r.Max.X-1)
			y := min(max(cy<<vs, r.Min.Y), r.Max.Y-1)
			c := cy*m.CStride + cx
			yy := int(m.Y[y*m.YStride+x])
			cb1, cr1 := int(m.Cb[c])-128, int(m.Cr[c])-128
			for _, v := range []int{yy + (91881*cr1+1<<15)>>16, yy + (-22554*cb1-46802*cr1+1<<15)>>16, yy + (116130*cb1+1<<15)>>16} {
				sum += int64(max(-v, v-255, 0))
			}
			n++
		}
	}
	return sum, n
}

// TestGamutExcessSum checks gamutExcess, with and without the AVX2 row kernel, against
// a plain sum on random planes of every layout, crops at odd and even offsets: the sum
// must be over a limit just under it and not over one just above it.
func TestGamutExcessSum(t *testing.T) {
	defer func(v bool) { useAVX2 = v }(useAVX2)
	simd := []bool{false}
	if useAVX2 {
		simd = append(simd, true)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	ratios := []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio422,
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411}
	for i := 0; i < 300; i++ {
		w, h := 1+rng.IntN(200), 1+rng.IntN(60)
		m := image.NewYCbCr(image.Rect(0, 0, w, h), ratios[i%len(ratios)])
		for j := range m.Y {
			m.Y[j] = uint8(rng.IntN(256))
		}
		for j := range m.Cb {
			// Mostly in gamut, some far out.
			m.Cb[j], m.Cr[j] = uint8(128+rng.IntN(60)-30), uint8(128+rng.IntN(60)-30)
			if rng.IntN(4) == 0 {
				m.Cb[j], m.Cr[j] = uint8(rng.IntN(256)), uint8(rng.IntN(256))
			}
		}
		x0, y0 := rng.IntN(w), rng.IntN(h)
		r := image.Rect(x0, y0, x0+1+rng.IntN(w-x0), y0+1+rng.IntN(h-y0))
		hs, vs, _ := chromaShifts(m.SubsampleRatio)
		sum, n := gamutSumRef(m, r, hs, vs)
		for _, s := range simd {
			useAVX2 = s
			if sum > 0 && !gamutExcess(m, r, hs, vs, (float64(sum)-0.5)/float64(n)) {
				t.Fatalf("AVX2 %v, %v %v of %dx%d: the sum %d is not over %d", s, m.SubsampleRatio, r, w, h, sum, sum-1)
			}
			if gamutExcess(m, r, hs, vs, (float64(sum)+0.5)/float64(n)) {
				t.Fatalf("AVX2 %v, %v %v of %dx%d: the sum %d is over itself", s, m.SubsampleRatio, r, w, h, sum)
			}
		}
	}
}
