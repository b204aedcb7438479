package decode

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlanMatchesReference holds compute to the straightforward version it replaced
// (computeReference, kept here): the same supports, padding and Q14 weights, bit for bit,
// so that a faster plan changes no pixel.
func TestPlanMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var got, want axisPlan
	for i := 0; i < 20000; i++ {
		n := 1 + rng.IntN(700)
		out := 1 + rng.IntN(300)
		if i%4 == 0 {
			out = 224
		}
		pad := []int{1, 2, 4}[rng.IntN(3)]
		off := rng.Float64() * float64(n) * 0.5
		length := (float64(n) - off) * (0.05 + 0.95*rng.Float64())
		if i%3 == 0 { // whole-sample spans, as Resize's
			off, length = 0, float64(n)
		}
		sp := span{off, length}
		got.compute(n, out, pad, sp)
		want.computeReference(n, out, pad, sp)
		if got.taps != want.taps || got.simd != want.simd || got.support != want.support ||
			got.lo != want.lo || got.hi != want.hi || !slices.Equal(got.start, want.start) || !slices.Equal(got.w, want.w) {
			t.Fatalf("n %d out %d pad %d span %v: plan differs from the reference (taps %d/%d)", n, out, pad, sp, got.taps, want.taps)
		}
	}
}

func TestRoundHalfUp(t *testing.T) {
	for _, v := range []float64{0, 0.49999999999999994, 0.5, 1.5, 2.5, 16383.5, 16383.499999999998, 16384, math.Nextafter(0.5, 0), 4096.5000000000009} {
		if got, want := roundHalfUp(v), int(math.Round(v)); got != want {
			t.Errorf("roundHalfUp(%v) = %d, want %d", v, got, want)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	var p axisPlan
	for i := 0; b.Loop(); i++ {
		p.compute(500, 224, 4, span{float64(i % 7), 400 + float64(i%13)})
	}
}

// computeReference is compute as first written (support1 twice per output, math.Round),
// the reference TestPlanMatchesReference holds the faster version to.
func (p *axisPlan) computeReference(n, out, pad int, sp span) {
	p.n, p.out, p.pad, p.span = n, out, pad, sp
	scale := sp.length / float64(out)
	fscale := max(scale, 1)
	support := fscale // the triangle filter's support is 1
	// First pass: the support of each output, to size the table.
	p.start = grow(p.start, out)
	taps := 1
	for i := 0; i < out; i++ {
		lo, hi := support1(i, sp.off, scale, support, n)
		p.start[i] = int32(lo)
		taps = max(taps, hi-lo)
	}
	p.support = taps
	p.lo, _ = support1(0, sp.off, scale, support, n)
	_, p.hi = support1(out-1, sp.off, scale, support, n)
	p.simd = false
	if pad > 1 {
		if t := (taps + pad - 1) / pad * pad; t <= n {
			taps, p.simd = t, true
		}
	}
	p.taps = taps
	p.w = grow(p.w, out*taps)
	clear(p.w)
	p.fw = grow(p.fw, taps)
	p.wx, p.w4 = p.wx[:0], p.w4[:0]
	for i := 0; i < out; i++ {
		center := sp.off + (float64(i)+0.5)*scale
		lo, hi := support1(i, sp.off, scale, support, n)
		// Keep the taps inside [0, n): outputs near the end start earlier, with zero
		// weights in front.
		s := min(lo, n-taps)
		p.start[i] = int32(s)
		fw := p.fw[:hi-lo]
		var total float64
		for k := range fw {
			t := math.Abs((float64(lo+k) - center + 0.5) / fscale)
			fw[k] = 0
			if t < 1 {
				fw[k] = 1 - t
				total += fw[k]
			}
		}
		w := p.w[i*taps+(lo-s) : i*taps+(lo-s)+len(fw)]
		if total == 0 { // cannot happen for a valid filter; keep the output defined
			w[0] = weightOne
			continue
		}
		var sum float64
		prev := 0
		for k := range fw {
			sum += fw[k]
			q := int(math.Round(sum / total * weightOne))
			if k == len(fw)-1 {
				q = weightOne
			}
			w[k] = int16(q - prev)
			prev = q
		}
	}
}
