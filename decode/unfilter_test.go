package decode

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestUnfilterKernels unfilters random rows of 3- and 4-byte pixels, every width up to 40
// and a wide one, with each filter, after a previous row and as the first row, with the
// assembly kernels and with the Go loops: the same bytes.
func TestUnfilterKernels(t *testing.T) {
	if !useUnfilterAVX {
		t.Skip("no assembly unfilters on this CPU or architecture: the Go loops are all there is")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bpp := range []int{3, 4} {
		for _, w := range append(rangeInts(1, 40), 1000) {
			for f := byte(0); f <= 4; f++ {
				for _, first := range []bool{false, true} {
					// Rows inside a buffer, as the decoder keeps them: bytes follow each.
					buf := make([]byte, 3*w*bpp+8)
					for i := range buf {
						buf[i] = byte(rng.Uint32())
					}
					prev, cur := buf[:w*bpp], buf[w*bpp:2*w*bpp]
					if first {
						prev = nil
					}
					want := append([]byte(nil), cur...)
					useUnfilterAVX = false
					okGo := unfilter(f, want, prev, bpp)
					useUnfilterAVX = true
					okAsm := unfilter(f, cur, prev, bpp)
					if okGo != okAsm || string(cur) != string(want) {
						t.Fatalf("bpp %d, width %d, filter %d, first row %v: the kernels unfilter differently", bpp, w, f, first)
					}
				}
			}
		}
	}
}

func rangeInts(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// BenchmarkUnfilter unfilters a 4000-pixel RGB row with each filter, with the assembly
// kernels (asm) and the Go loops (go).
func BenchmarkUnfilter(b *testing.B) {
	const w, bpp = 4000, 3
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 2*w*bpp+8)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	prev, cur := buf[:w*bpp], buf[w*bpp:2*w*bpp]
	for _, f := range []byte{1, 2, 3, 4} {
		for _, asm := range []bool{true, false} {
			if asm && !useUnfilterAVX {
				continue
			}
			name := map[bool]string{true: "asm", false: "go"}[asm]
			b.Run(fmt.Sprintf("filter=%d/%s", f, name), func(b *testing.B) {
				defer func(v bool) { useUnfilterAVX = v }(useUnfilterAVX)
				useUnfilterAVX = asm
				b.SetBytes(int64(len(cur)))
				for b.Loop() {
					unfilter(f, cur, prev, bpp)
				}
			})
		}
	}
}
