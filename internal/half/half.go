// Package half converts between float32 and the 16-bit float formats conveyor packs,
// IEEE binary16 and bfloat16, rounding to nearest even as torch and numpy do. The packer
// keeps its own copy of the encoders on its hot path; this one serves code that reads
// packed batches back, such as batch mixing.
package half

import "math"

// Float16 rounds f to the nearest IEEE binary16, ties to even: values beyond the largest
// finite half (65504) by at least half a step become infinities, tiny ones subnormals or
// zeros, and a NaN stays a quiet NaN.
func Float16(f float32) uint16 {
	if h, ok := Float16Normal(f); ok {
		return h
	}
	return float16Slow(math.Float32bits(f))
}

// Float16Normal is Float16 for an f that rounds to a normal half, 2^-14 ≤ |f| < 65520,
// and ok false for any other f. It is small enough to inline into a hot loop, with
// Float16 for the rest.
func Float16Normal(f float32) (h uint16, ok bool) {
	b := math.Float32bits(f)
	a := b & 0x7fffffff
	if a-0x38800000 >= 0x477ff000-0x38800000 {
		return 0, false
	}
	// Rebias the exponent and round the mantissa to nearest even; a carry moves into the
	// exponent, as it should.
	return uint16(b>>16)&0x8000 | uint16((a-0x38000000+0xfff+(a>>13)&1)>>13), true
}

// float16Slow is Float16 for every float32 bit pattern b, by cases.
func float16Slow(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		return sign | uint16(roundShift(mant|0x800000, uint(14-e)))
	}
	return sign | uint16(roundShift(uint32(e)<<23|mant, 13))
}

// Float16To32 returns the float32 equal to the binary16 value h (every half is exactly a
// float32).
func Float16To32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant·2^-24.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// BFloat16 rounds f to the nearest bfloat16 (the top half of a float32), ties to even; a
// NaN stays a quiet NaN.
func BFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	// Without a data-dependent branch: mixed pixels round up or down at random.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16To32 returns the float32 equal to the bfloat16 value h.
func BFloat16To32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundShift returns v >> s rounded to nearest, ties to even.
func roundShift(v uint32, s uint) uint32 {
	q := v >> s
	rem := v & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}
