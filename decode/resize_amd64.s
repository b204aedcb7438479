//go:build amd64 && !purego

#include "textflag.h"

// Resampling kernels for packed RGB with Q14 weights (see resize.go). The vertical
// kernels pair taps so that one VPMADDWD multiplies 16 samples of two rows by their two
// weights and adds the pairs: 32 multiply-adds per instruction. The horizontal kernels
// shuffle two neighbouring pixels (r0 g0 b0 r1 g1 b1) to (r0 r1 g0 g1 b0 b1) so the same
// instruction applies two taps to all three channels, two pixel pairs per YMM register.

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func vert8to16AVX2(dst *uint16, src *uint8, stride int, w *int16, pairs int, n int)
TEXT ·vert8to16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ pairs+32(FP), R9
	MOVQ n+40(FP), CX
	MOVL $64, AX // round1
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	XORQ BX, BX

v8col:
	CMPQ BX, CX
	JGE v8done
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	LEAQ (SI)(BX*1), R10
	MOVQ R8, R11
	MOVQ R9, R12

v8tap:
	VPMOVZXBW (R10), Y2
	VPMOVZXBW (R10)(DX*1), Y3
	VPBROADCASTD (R11), Y4
	VPUNPCKLWD Y3, Y2, Y5
	VPUNPCKHWD Y3, Y2, Y6
	VPMADDWD Y4, Y5, Y5
	VPMADDWD Y4, Y6, Y6
	VPADDD Y5, Y0, Y0
	VPADDD Y6, Y1, Y1
	LEAQ (R10)(DX*2), R10
	ADDQ $4, R11
	DECQ R12
	JNZ v8tap

	VPADDD Y15, Y0, Y0
	VPADDD Y15, Y1, Y1
	VPSRAD $7, Y0, Y0
	VPSRAD $7, Y1, Y1
	VPACKUSDW Y1, Y0, Y0
	VMOVDQU Y0, (DI)(BX*2)
	ADDQ $16, BX
	JMP v8col

v8done:
	VZEROUPPER
	RET

// func vert16to8AVX2(dst *uint8, src *uint16, stride int, w *int16, pairs int, n int)
TEXT ·vert16to8AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ pairs+32(FP), R9
	MOVQ n+40(FP), CX
	MOVL $0x100000, AX // round2
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	XORQ BX, BX

v16col:
	CMPQ BX, CX
	JGE v16done
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	LEAQ (SI)(BX*2), R10
	MOVQ R8, R11
	MOVQ R9, R12

v16tap:
	VMOVDQU (R10), Y2
	VMOVDQU (R10)(DX*1), Y3
	VPBROADCASTD (R11), Y4
	VPUNPCKLWD Y3, Y2, Y5
	VPUNPCKHWD Y3, Y2, Y6
	VPMADDWD Y4, Y5, Y5
	VPMADDWD Y4, Y6, Y6
	VPADDD Y5, Y0, Y0
	VPADDD Y6, Y1, Y1
	LEAQ (R10)(DX*2), R10
	ADDQ $4, R11
	DECQ R12
	JNZ v16tap

	VPADDD Y15, Y0, Y0
	VPADDD Y15, Y1, Y1
	VPSRAD $21, Y0, Y0
	VPSRAD $21, Y1, Y1
	VPACKUSDW Y1, Y0, Y0
	VPACKUSWB Y0, Y0, Y0
	VPERMQ $0x08, Y0, Y0
	VMOVDQU X0, (DI)(BX*1)
	ADDQ $16, BX
	JMP v16col

v16done:
	VZEROUPPER
	RET

// Shuffle masks for the horizontal kernels. For 16-bit input each 128-bit lane holds
// (r0 g0 b0 r1 g1 b1 r2 g2) and becomes (r0 r1 g0 g1 b0 b1 0 0). For 8-bit input both
// lanes hold the same 16 bytes (four pixels); the low lane widens pixels 0 and 1 and the
// high lane pixels 2 and 3 into the same 16-bit layout.
DATA shuf16<>+0x00(SB)/8, $0x0908030207060100
DATA shuf16<>+0x08(SB)/8, $0x808080800b0a0504
DATA shuf16<>+0x10(SB)/8, $0x0908030207060100
DATA shuf16<>+0x18(SB)/8, $0x808080800b0a0504
GLOBL shuf16<>(SB), RODATA|NOPTR, $32

DATA shuf8<>+0x00(SB)/8, $0x8004800180038000
DATA shuf8<>+0x08(SB)/8, $0x8080808080058002
DATA shuf8<>+0x10(SB)/8, $0x800a800780098006
DATA shuf8<>+0x18(SB)/8, $0x80808080800b8008
GLOBL shuf8<>(SB), RODATA|NOPTR, $32

// pack6 keeps bytes 0-2 and 4-6: two packed pixels' r, g, b without their fourth lane.
DATA pack6<>+0x00(SB)/8, $0x8080060504020100
DATA pack6<>+0x08(SB)/8, $0x8080808080808080
GLOBL pack6<>(SB), RODATA|NOPTR, $16

// pack12 keeps words 0-2 and 4-6: two pixels' r, g, b intermediates without their
// fourth lane.
DATA pack12<>+0x00(SB)/8, $0x0908050403020100
DATA pack12<>+0x08(SB)/8, $0x808080800d0c0b0a
GLOBL pack12<>(SB), RODATA|NOPTR, $16

// func horiz8to16AVX2(dst *uint16, src *uint8, start *int32, w *int16, groups int, out int)
TEXT ·horiz8to16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ start+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ groups+32(FP), R10
	MOVQ out+40(FP), CX
	TESTQ CX, CX
	JZ h8done
	VMOVDQU shuf8<>(SB), Y14
	MOVL $64, AX // round1
	VMOVD AX, X15
	VPBROADCASTD X15, X15

	// Two pixels per iteration, as horiz16to8AVX2 does.
	MOVQ CX, BX
	SHRQ $1, BX
	JZ h8single
	VMOVDQU pack12<>(SB), X13
	MOVQ R10, AX
	SHLQ $5, AX // one pixel's weights, in bytes

h8pair:
	VPXOR Y0, Y0, Y0
	VPXOR Y2, Y2, Y2
	MOVLQSX (R8), R11
	LEAQ (R11)(R11*2), R11
	ADDQ SI, R11
	MOVLQSX 4(R8), DX
	LEAQ (DX)(DX*2), DX
	ADDQ SI, DX
	MOVQ R9, R13
	LEAQ (R9)(AX*1), R14
	MOVQ R10, R12

h8ptap:
	VBROADCASTI128 (R11), Y1
	VPSHUFB Y14, Y1, Y1
	VPMADDWD (R13), Y1, Y1
	VPADDD Y1, Y0, Y0
	VBROADCASTI128 (DX), Y3
	VPSHUFB Y14, Y3, Y3
	VPMADDWD (R14), Y3, Y3
	VPADDD Y3, Y2, Y2
	ADDQ $12, R11
	ADDQ $12, DX
	ADDQ $32, R13
	ADDQ $32, R14
	DECQ R12
	JNZ h8ptap

	MOVQ R14, R9
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VEXTRACTI128 $1, Y2, X3
	VPADDD X3, X2, X2
	VPADDD X15, X0, X0
	VPADDD X15, X2, X2
	VPSRAD $7, X0, X0
	VPSRAD $7, X2, X2
	VPACKUSDW X2, X0, X0 // A's r g b 0, B's r g b 0
	VPSHUFB X13, X0, X0 // A's r g b, B's r g b
	VMOVQ X0, (DI)
	VPEXTRD $2, X0, R12
	MOVL R12, 8(DI)
	ADDQ $12, DI
	ADDQ $8, R8
	DECQ BX
	JNZ h8pair

h8single:
	ANDQ $1, CX
	JZ h8done

h8px:
	VPXOR Y0, Y0, Y0
	MOVLQSX (R8), AX
	LEAQ (AX)(AX*2), AX
	LEAQ (SI)(AX*1), R11
	MOVQ R10, R12

h8tap:
	VBROADCASTI128 (R11), Y1
	VPSHUFB Y14, Y1, Y1
	VPMADDWD (R9), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $12, R11
	ADDQ $32, R9
	DECQ R12
	JNZ h8tap

	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPADDD X15, X0, X0
	VPSRAD $7, X0, X0
	VPACKUSDW X0, X0, X0
	VMOVQ X0, AX
	MOVL AX, (DI)
	SHRQ $32, AX
	MOVW AX, 4(DI)
	ADDQ $6, DI
	ADDQ $4, R8
	DECQ CX
	JNZ h8px

h8done:
	VZEROUPPER
	RET

// func horiz16to8AVX2(dst *uint8, src *uint16, start *int32, w *int16, groups int, out int)
TEXT ·horiz16to8AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ start+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ groups+32(FP), R10
	MOVQ out+40(FP), CX
	TESTQ CX, CX
	JZ h16done
	VMOVDQU shuf16<>(SB), Y14
	MOVL $0x100000, AX // round2
	VMOVD AX, X15
	VPBROADCASTD X15, X15

	// Two pixels per iteration, A from R11 with weights at R13 and B from DX with
	// weights at R14 (B's follow A's): one reduction, pack and store for both.
	MOVQ CX, BX
	SHRQ $1, BX
	JZ h16single
	VMOVDQU pack6<>(SB), X13
	MOVQ R10, AX
	SHLQ $5, AX // one pixel's weights, in bytes

h16pair:
	VPXOR Y0, Y0, Y0
	VPXOR Y2, Y2, Y2
	MOVLQSX (R8), R11
	LEAQ (R11)(R11*2), R11
	LEAQ (SI)(R11*2), R11
	MOVLQSX 4(R8), DX
	LEAQ (DX)(DX*2), DX
	LEAQ (SI)(DX*2), DX
	MOVQ R9, R13
	LEAQ (R9)(AX*1), R14
	MOVQ R10, R12

h16ptap:
	VMOVDQU (R11), X1
	VINSERTI128 $1, 12(R11), Y1, Y1
	VPSHUFB Y14, Y1, Y1
	VPMADDWD (R13), Y1, Y1
	VPADDD Y1, Y0, Y0
	VMOVDQU (DX), X3
	VINSERTI128 $1, 12(DX), Y3, Y3
	VPSHUFB Y14, Y3, Y3
	VPMADDWD (R14), Y3, Y3
	VPADDD Y3, Y2, Y2
	ADDQ $24, R11
	ADDQ $24, DX
	ADDQ $32, R13
	ADDQ $32, R14
	DECQ R12
	JNZ h16ptap

	MOVQ R14, R9
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VEXTRACTI128 $1, Y2, X3
	VPADDD X3, X2, X2
	VPADDD X15, X0, X0
	VPADDD X15, X2, X2
	VPSRAD $21, X0, X0
	VPSRAD $21, X2, X2
	VPACKUSDW X2, X0, X0 // A's r g b 0, B's r g b 0
	VPACKUSWB X0, X0, X0
	VPSHUFB X13, X0, X0 // A's r g b, B's r g b
	VMOVD X0, (DI)
	VPEXTRW $2, X0, R12
	MOVW R12, 4(DI)
	ADDQ $6, DI
	ADDQ $8, R8
	DECQ BX
	JNZ h16pair

h16single:
	ANDQ $1, CX
	JZ h16done

h16px:
	VPXOR Y0, Y0, Y0
	MOVLQSX (R8), AX
	LEAQ (AX)(AX*2), AX
	LEAQ (SI)(AX*2), R11
	MOVQ R10, R12

h16tap:
	VMOVDQU (R11), X1
	VINSERTI128 $1, 12(R11), Y1, Y1
	VPSHUFB Y14, Y1, Y1
	VPMADDWD (R9), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $24, R11
	ADDQ $32, R9
	DECQ R12
	JNZ h16tap

	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPADDD X15, X0, X0
	VPSRAD $21, X0, X0
	VPACKUSDW X0, X0, X0
	VPACKUSWB X0, X0, X0
	VMOVD X0, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	ADDQ $3, DI
	ADDQ $4, R8
	DECQ CX
	JNZ h16px

h16done:
	VZEROUPPER
	RET

// One-channel horizontal kernels for planar resampling (planar.go): four outputs per
// iteration, each reading groups of four taps (four samples from its own start); w is in
// planeWeights' layout, 16 weights per group of four outputs. Two VPMADDWD pairs per
// output and group, then one VPHADDD puts the four sums in order.

// func horiz16to8x1AVX2(dst *uint8, src *uint16, start *int32, w *int16, groups int, quads int)
TEXT ·horiz16to8x1AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ start+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ groups+32(FP), R10
	MOVQ quads+40(FP), CX
	TESTQ CX, CX
	JZ p16done
	MOVL $0x100000, AX // round2
	VMOVD AX, X15
	VPBROADCASTD X15, X15

p16quad:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), BX
	MOVLQSX 8(R8), DX
	MOVLQSX 12(R8), R11
	LEAQ (SI)(AX*2), AX
	LEAQ (SI)(BX*2), BX
	LEAQ (SI)(DX*2), DX
	LEAQ (SI)(R11*2), R11
	XORQ R12, R12
	MOVQ R10, R13
	VPXOR Y0, Y0, Y0

p16group:
	VMOVQ (AX)(R12*1), X1
	VPINSRQ $1, (BX)(R12*1), X1, X1
	VMOVQ (DX)(R12*1), X2
	VPINSRQ $1, (R11)(R12*1), X2, X2
	VINSERTI128 $1, X2, Y1, Y1
	VPMADDWD (R9), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $8, R12
	ADDQ $32, R9
	DECQ R13
	JNZ p16group

	VEXTRACTI128 $1, Y0, X1
	VPHADDD X1, X0, X0
	VPADDD X15, X0, X0
	VPSRAD $21, X0, X0
	VPACKUSDW X0, X0, X0
	VPACKUSWB X0, X0, X0
	VMOVD X0, (DI)
	ADDQ $4, DI
	ADDQ $16, R8
	DECQ CX
	JNZ p16quad

p16done:
	VZEROUPPER
	RET

// func horiz8to16x1AVX2(dst *uint16, src *uint8, start *int32, w *int16, groups int, quads int)
TEXT ·horiz8to16x1AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ start+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ groups+32(FP), R10
	MOVQ quads+40(FP), CX
	TESTQ CX, CX
	JZ p8done
	MOVL $64, AX // round1
	VMOVD AX, X15
	VPBROADCASTD X15, X15

p8quad:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), BX
	MOVLQSX 8(R8), DX
	MOVLQSX 12(R8), R11
	ADDQ SI, AX
	ADDQ SI, BX
	ADDQ SI, DX
	ADDQ SI, R11
	XORQ R12, R12
	MOVQ R10, R13
	VPXOR Y0, Y0, Y0

p8group:
	VMOVD (AX)(R12*1), X1
	VPINSRD $1, (BX)(R12*1), X1, X1
	VPINSRD $2, (DX)(R12*1), X1, X1
	VPINSRD $3, (R11)(R12*1), X1, X1
	VPMOVZXBW X1, Y1
	VPMADDWD (R9), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $4, R12
	ADDQ $32, R9
	DECQ R13
	JNZ p8group

	VEXTRACTI128 $1, Y0, X1
	VPHADDD X1, X0, X0
	VPADDD X15, X0, X0
	VPSRAD $7, X0, X0
	VPACKUSDW X0, X0, X0
	VMOVQ X0, (DI)
	ADDQ $8, DI
	ADDQ $16, R8
	DECQ CX
	JNZ p8quad

p8done:
	VZEROUPPER
	RET

// func horiz8to16x1ShufAVX2(dst *uint16, src *uint8, start *int32, w *int16, shuf *uint8, groups, quads int)
// horiz8to16x1AVX2 for quads whose four outputs' taps lie within 16 bytes of the first
// one's start: one 16-byte load per group of taps and a byte shuffle (shuf, 16 bytes per
// quad) put the four outputs' four taps where the gathering kernel's four loads do.
TEXT ·horiz8to16x1ShufAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ start+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ shuf+32(FP), R14
	MOVQ groups+40(FP), R10
	MOVQ quads+48(FP), CX
	TESTQ CX, CX
	JZ s8done
	MOVL $64, AX // round1
	VMOVD AX, X15
	VPBROADCASTD X15, X15

s8quad:
	MOVLQSX 0(R8), AX
	ADDQ SI, AX
	VMOVDQU (R14), X14
	MOVQ R10, R13
	VPXOR Y0, Y0, Y0

s8group:
	VMOVDQU (AX), X1
	VPSHUFB X14, X1, X1
	VPMOVZXBW X1, Y1
	VPMADDWD (R9), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $4, AX
	ADDQ $32, R9
	DECQ R13
	JNZ s8group

	VEXTRACTI128 $1, Y0, X1
	VPHADDD X1, X0, X0
	VPADDD X15, X0, X0
	VPSRAD $7, X0, X0
	VPACKUSDW X0, X0, X0
	VMOVQ X0, (DI)
	ADDQ $8, DI
	ADDQ $16, R8
	ADDQ $16, R14
	DECQ CX
	JNZ s8quad

s8done:
	VZEROUPPER
	RET

// YCbCr to packed RGB for planar resampling's output, eight pixels per iteration, with
// color.YCbCrToRGB's arithmetic: 16.16 fixed point, then a shift and the saturating packs
// clamp to [0, 255] exactly as its clamp does.

DATA yccshuf<>+0x00(SB)/8, $0x0602090501080400
DATA yccshuf<>+0x08(SB)/8, $0x808080800b07030a
DATA yccshuf<>+0x10(SB)/8, $0x0602090501080400
DATA yccshuf<>+0x18(SB)/8, $0x808080800b07030a
GLOBL yccshuf<>(SB), RODATA|NOPTR, $32

// func ycbcrRowAVX2(dst *uint8, y, cb, cr *uint8, blocks int)
TEXT ·ycbcrRowAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ cb+16(FP), R8
	MOVQ cr+24(FP), R9
	MOVQ blocks+32(FP), CX
	TESTQ CX, CX
	JZ yccdone
	MOVL $128, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x10101, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9
	MOVL $91881, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $22554, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $46802, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $116130, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VMOVDQU yccshuf<>(SB), Y14

yccloop:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD (R8), Y1
	VPMOVZXBD (R9), Y2
	VPMULLD Y9, Y0, Y0  // y * 0x10101
	VPSUBD Y8, Y1, Y1   // cb - 128
	VPSUBD Y8, Y2, Y2   // cr - 128
	VPMULLD Y10, Y2, Y3
	VPADDD Y0, Y3, Y3   // r
	VPMULLD Y13, Y1, Y5
	VPADDD Y0, Y5, Y5   // b
	VPMULLD Y11, Y1, Y4
	VPMULLD Y12, Y2, Y6
	VPSUBD Y4, Y0, Y4
	VPSUBD Y6, Y4, Y4   // g
	VPSRAD $16, Y3, Y3
	VPSRAD $16, Y4, Y4
	VPSRAD $16, Y5, Y5
	VPACKSSDW Y4, Y3, Y3 // r0-3 g0-3 | r4-7 g4-7
	VPACKSSDW Y5, Y5, Y5 // b0-3 b0-3 | b4-7 b4-7
	VPACKUSWB Y5, Y3, Y3 // bytes: r g b b per four pixels, per lane
	VPSHUFB Y14, Y3, Y3  // r g b r g b ... twelve bytes per lane
	VMOVQ X3, (DI)
	VPEXTRD $2, X3, 8(DI)
	VEXTRACTI128 $1, Y3, X4
	VMOVQ X4, 12(DI)
	VPEXTRD $2, X4, 20(DI)
	ADDQ $8, SI
	ADDQ $8, R8
	ADDQ $8, R9
	ADDQ $24, DI
	DECQ CX
	JNZ yccloop

yccdone:
	VZEROUPPER
	RET

// func upsampleHVAVX2(dst, near, far *uint8, blocks int)
//
// upsampleHV for 16*blocks chroma samples: reads near and far from one sample before the
// first to one after the last, writes two outputs a sample. Column sums 3·near + far
// (at most 1020) and 3·this + neighbour + bias (at most 4087) fit 16 bits, so the
// arithmetic is upsampleHV's; the even (left) and odd (right) outputs of each sample are
// joined as the low and high bytes of one word, which lays them out in order.
TEXT ·upsampleHVAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ near+8(FP), SI
	MOVQ far+16(FP), DX
	MOVQ blocks+24(FP), CX
	TESTQ CX, CX
	JZ uhvdone
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTW X14, Y14
	MOVL $7, AX
	VMOVD AX, X15
	VPBROADCASTW X15, Y15

uhvloop:
	VPMOVZXBW -1(SI), Y0
	VPMOVZXBW -1(DX), Y1
	VPMOVZXBW (SI), Y2
	VPMOVZXBW (DX), Y3
	VPMOVZXBW 1(SI), Y4
	VPMOVZXBW 1(DX), Y5
	VPADDW Y0, Y0, Y6
	VPADDW Y0, Y6, Y6
	VPADDW Y1, Y6, Y0   // last: 3·near + far of the sample before
	VPADDW Y2, Y2, Y6
	VPADDW Y2, Y6, Y6
	VPADDW Y3, Y6, Y2   // this
	VPADDW Y4, Y4, Y6
	VPADDW Y4, Y6, Y6
	VPADDW Y5, Y6, Y4   // next
	VPADDW Y2, Y2, Y6
	VPADDW Y2, Y6, Y6   // 3·this
	VPADDW Y6, Y0, Y0
	VPADDW Y14, Y0, Y0
	VPSRLW $4, Y0, Y0   // left outputs
	VPADDW Y6, Y4, Y4
	VPADDW Y15, Y4, Y4
	VPSRLW $4, Y4, Y4   // right outputs
	VPSLLW $8, Y4, Y4
	VPOR Y4, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, SI
	ADDQ $16, DX
	ADDQ $32, DI
	DECQ CX
	JNZ uhvloop

uhvdone:
	VZEROUPPER
	RET

DATA gamutk<>+0x00(SB)/4, $0x000000ff
DATA gamutk<>+0x04(SB)/4, $32768
DATA gamutk<>+0x08(SB)/4, $128
DATA gamutk<>+0x0c(SB)/4, $91881
DATA gamutk<>+0x10(SB)/4, $-22554
DATA gamutk<>+0x14(SB)/4, $-46802
DATA gamutk<>+0x18(SB)/4, $116130
DATA gamutk<>+0x1c(SB)/4, $255
GLOBL gamutk<>(SB), RODATA|NOPTR, $32

// func gamutRowAVX2(y, cb, cr *uint8, blocks int) int32
//
// gamutExcess's row sum for 8*blocks samples of a horizontally 2:1 subsampled row:
// sample k is chroma byte 2k and luma byte 4k, eight of them a YMM register of dwords.
TEXT ·gamutRowAVX2(SB), NOSPLIT, $0-36
	MOVQ y+0(FP), SI
	MOVQ cb+8(FP), R8
	MOVQ cr+16(FP), R9
	MOVQ blocks+24(FP), CX
	VPXOR Y15, Y15, Y15 // sum
	TESTQ CX, CX
	JZ gamutsum
	VPBROADCASTD gamutk<>+0x00(SB), Y8  // 0xff
	VPBROADCASTD gamutk<>+0x04(SB), Y9  // rounding
	VPBROADCASTD gamutk<>+0x08(SB), Y10 // 128
	VPBROADCASTD gamutk<>+0x0c(SB), Y11
	VPBROADCASTD gamutk<>+0x10(SB), Y12
	VPBROADCASTD gamutk<>+0x14(SB), Y13
	VPBROADCASTD gamutk<>+0x18(SB), Y14
	VPXOR Y7, Y7, Y7 // zero

gamutloop:
	VMOVDQU (SI), Y0
	VPAND Y8, Y0, Y0     // yy
	VPMOVZXWD (R8), Y1
	VPAND Y8, Y1, Y1
	VPSUBD Y10, Y1, Y1   // cb - 128
	VPMOVZXWD (R9), Y2
	VPAND Y8, Y2, Y2
	VPSUBD Y10, Y2, Y2   // cr - 128
	VPMULLD Y11, Y2, Y3
	VPADDD Y9, Y3, Y3
	VPSRAD $16, Y3, Y3
	VPADDD Y0, Y3, Y3    // r
	VPMULLD Y12, Y1, Y4
	VPMULLD Y13, Y2, Y5
	VPADDD Y5, Y4, Y4
	VPADDD Y9, Y4, Y4
	VPSRAD $16, Y4, Y4
	VPADDD Y0, Y4, Y4    // g
	VPMULLD Y14, Y1, Y5
	VPADDD Y9, Y5, Y5
	VPSRAD $16, Y5, Y5
	VPADDD Y0, Y5, Y5    // b
	// excess(v) = max(-v, v-255, 0)
	VPBROADCASTD gamutk<>+0x1c(SB), Y6
	VPSUBD Y3, Y7, Y0
	VPSUBD Y6, Y3, Y3
	VPMAXSD Y0, Y3, Y3
	VPMAXSD Y7, Y3, Y3
	VPADDD Y3, Y15, Y15
	VPSUBD Y4, Y7, Y0
	VPSUBD Y6, Y4, Y4
	VPMAXSD Y0, Y4, Y4
	VPMAXSD Y7, Y4, Y4
	VPADDD Y4, Y15, Y15
	VPSUBD Y5, Y7, Y0
	VPSUBD Y6, Y5, Y5
	VPMAXSD Y0, Y5, Y5
	VPMAXSD Y7, Y5, Y5
	VPADDD Y5, Y15, Y15
	ADDQ $32, SI
	ADDQ $16, R8
	ADDQ $16, R9
	DECQ CX
	JNZ gamutloop

gamutsum:
	VEXTRACTI128 $1, Y15, X0
	VPADDD X0, X15, X15
	VPSHUFD $0x4e, X15, X0
	VPADDD X0, X15, X15
	VPSHUFD $0xb1, X15, X0
	VPADDD X0, X15, X15
	VMOVD X15, AX
	MOVL AX, ret+32(FP)
	VZEROUPPER
	RET
