package half

import (
	"math"
	"testing"
)

// TestRoundTrip checks that every finite 16-bit value survives float32 and back, in both
// formats, and that decoding agrees with the values' definitions at a few points.
func TestRoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		u := uint16(h)
		if f := Float16To32(u); !math.IsNaN(float64(f)) && Float16(f) != u {
			t.Fatalf("float16 %#04x -> %g -> %#04x", u, f, Float16(f))
		}
		if f := BFloat16To32(u); !math.IsNaN(float64(f)) && BFloat16(f) != u {
			t.Fatalf("bfloat16 %#04x -> %g -> %#04x", u, f, BFloat16(f))
		}
	}
	for _, c := range []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 1.0 / (1 << 24)}, {0x8001, -1.0 / (1 << 24)}, {0x3555, 0.333251953125},
	} {
		if got := Float16To32(c.h); got != c.want {
			t.Errorf("Float16To32(%#04x) = %g, want %g", c.h, got, c.want)
		}
	}
}

func TestRounding(t *testing.T) {
	for _, c := range []struct {
		f         float32
		f16, bf16 uint16
	}{
		{1 + 1.0/2048, 0x3c00, 0x3f80}, // a tie below: even stays
		{1 + 3.0/2048, 0x3c02, 0x3f80}, // a tie above an odd: rounds up
		{70000, 0x7c00, 0x4789},        // beyond the largest half
		{0.1, 0x2e66, 0x3dcd},
	} {
		if got := Float16(c.f); got != c.f16 {
			t.Errorf("Float16(%g) = %#04x, want %#04x", c.f, got, c.f16)
		}
		if got := BFloat16(c.f); got != c.bf16 {
			t.Errorf("BFloat16(%g) = %#04x, want %#04x", c.f, got, c.bf16)
		}
	}
}

// TestFastPath compares Float16's shortcut for normal halves with the general rounding, and
// BFloat16's branch-free rounding with the rounding by cases, on
// a sweep of float32 bit patterns: every 61st pattern (all exponents, mantissas of every
// residue), plus the patterns around each half's rounding boundary.
func TestFastPath(t *testing.T) {
	check := func(b uint32) {
		if got, want := Float16(math.Float32frombits(b)), float16Slow(b); got != want {
			t.Fatalf("Float16(%#08x = %g) = %#04x, want %#04x", b, math.Float32frombits(b), got, want)
		}
		if b&0x7fffffff <= 0x7f800000 {
			if got, want := BFloat16(math.Float32frombits(b)), uint16(roundShift(b, 16)); got != want {
				t.Fatalf("BFloat16(%#08x = %g) = %#04x, want %#04x", b, math.Float32frombits(b), got, want)
			}
		}
	}
	for b := uint64(0); b < 1<<32; b += 61 {
		check(uint32(b))
	}
	for h := range 1 << 15 {
		f := math.Float32bits(Float16To32(uint16(h)))
		for d := uint32(0); d < 1<<13+2; d += 1 << 11 {
			for _, e := range []uint32{d - 1, d, d + 1} {
				check(f + e)
				check(f + e | 0x80000000)
			}
		}
		for _, e := range []uint32{0x7fff, 0x8000, 0x8001, 0x17fff, 0x18000, 0x18001} {
			check(uint32(h)<<17 + e) // around bfloat16 boundaries of every exponent
		}
	}
}
