package decode

// clampSample clamps v to a byte.
func clampSample(v int32) byte {
	if uint32(v) <= 255 {
		return byte(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// The accurate integer inverse DCT of the IJG's jidctint.c: fixed-point constants with 13
// fraction bits, and 2 more bits kept between the column and the row pass.
const (
	idctConstBits = 13
	idctPass1Bits = 2

	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_541196100 = 4433
	fix0_765366865 = 6270
	fix0_899976223 = 7373
	fix1_175875602 = 9633
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_562915447 = 20995
	fix3_072711026 = 25172
)

// idctIslow inverse-transforms the dequantised coefficients blk (natural order) into an
// 8×8 block of samples at dst, rows stride bytes apart.
func idctIslow(blk *[64]int32, dst []byte, stride int) {
	var ws [64]int32
	// Pass 1: columns, into ws with idctPass1Bits more bits.
	for c := range 8 {
		in := blk[c:]
		if in[8]|in[16]|in[24]|in[32]|in[40]|in[48]|in[56] == 0 {
			dc := in[0] << idctPass1Bits
			for r := range 8 {
				ws[8*r+c] = dc
			}
			continue
		}
		e0, e1, e2, e3, o0, o1, o2, o3 := idct1(in[0], in[8], in[16], in[24], in[32], in[40], in[48], in[56])
		const sh = idctConstBits - idctPass1Bits
		const rnd = 1 << (sh - 1)
		ws[0*8+c] = (e0 + o3 + rnd) >> sh
		ws[7*8+c] = (e0 - o3 + rnd) >> sh
		ws[1*8+c] = (e1 + o2 + rnd) >> sh
		ws[6*8+c] = (e1 - o2 + rnd) >> sh
		ws[2*8+c] = (e2 + o1 + rnd) >> sh
		ws[5*8+c] = (e2 - o1 + rnd) >> sh
		ws[3*8+c] = (e3 + o0 + rnd) >> sh
		ws[4*8+c] = (e3 - o0 + rnd) >> sh
	}
	// Pass 2: rows, descaled to samples and level-shifted.
	_ = dst[7*stride+7]
	for r := range 8 {
		in := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+8 : r*stride+8]
		if in[1]|in[2]|in[3]|in[4]|in[5]|in[6]|in[7] == 0 {
			v := clampSample((in[0]+1<<(idctPass1Bits+2))>>(idctPass1Bits+3) + 128)
			for x := range out {
				out[x] = v
			}
			continue
		}
		e0, e1, e2, e3, o0, o1, o2, o3 := idct1(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7])
		const sh = idctConstBits + idctPass1Bits + 3
		const rnd = 1<<(sh-1) + 128<<sh
		out[0] = clampSample((e0 + o3 + rnd) >> sh)
		out[7] = clampSample((e0 - o3 + rnd) >> sh)
		out[1] = clampSample((e1 + o2 + rnd) >> sh)
		out[6] = clampSample((e1 - o2 + rnd) >> sh)
		out[2] = clampSample((e2 + o1 + rnd) >> sh)
		out[5] = clampSample((e2 - o1 + rnd) >> sh)
		out[3] = clampSample((e3 + o0 + rnd) >> sh)
		out[4] = clampSample((e3 - o0 + rnd) >> sh)
	}
}

// idct1 is the 1-D transform of jidctint.c on x0..x7, up to the final butterflies: it
// returns the even part (tmp10, tmp11, tmp12, tmp13) and the odd part (tmp0..tmp3), each
// scaled by 2^idctConstBits.
func idct1(x0, x1, x2, x3, x4, x5, x6, x7 int32) (e0, e1, e2, e3, o0, o1, o2, o3 int32) {
	// Even part.
	z1 := (x2 + x6) * fix0_541196100
	t2 := z1 - x6*fix1_847759065
	t3 := z1 + x2*fix0_765366865
	t0 := (x0 + x4) << idctConstBits
	t1 := (x0 - x4) << idctConstBits
	e0, e3 = t0+t3, t0-t3
	e1, e2 = t1+t2, t1-t2
	// Odd part.
	a0, a1, a2, a3 := x7, x5, x3, x1
	z1 = a0 + a3
	z2 := a1 + a2
	z3 := a0 + a2
	z4 := a1 + a3
	z5 := (z3 + z4) * fix1_175875602
	a0 *= fix0_298631336
	a1 *= fix2_053119869
	a2 *= fix3_072711026
	a3 *= fix1_501321110
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 = z3*-fix1_961570560 + z5
	z4 = z4*-fix0_390180644 + z5
	o0 = a0 + z1 + z3
	o1 = a1 + z2 + z4
	o2 = a2 + z2 + z3
	o3 = a3 + z1 + z4
	return
}
