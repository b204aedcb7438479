//go:build amd64 && !purego

#include "textflag.h"

// Normalising kernels for 32-bit float samples (see pack_amd64.go). Each computes
// torchvision's (x/255 - mean)/std in float32 for eight samples at a time, replacing each
// division by a multiplication by the reciprocal and one Newton correction with FMA
// (q = a·r; q += (a - q·d)·r), which rounds as the division does for the 256 values a
// channel can take; NewPacker checks that it does before using the kernels.
//
// Constants (a *fmaConsts): r255, c255, then three vectors each of mean, std and 1/std:
// one per channel for NCHW, one per group of eight samples for NHWC (the channels repeat
// every three samples, so their constants every 24).
#define R255 0
#define C255 32
#define MEAN 64
#define STD 160
#define RSTD 256

// NORM turns the eight 32-bit integers in X (a Y register) into normalised floats in T,
// with the constants of vector V; X and A are scratch. R8 holds the constants, Y12 r255, Y11 255.
#define NORM(X, A, T, V) \
	VCVTDQ2PS X, X; \
	VMULPS Y12, X, A; \
	VFNMADD231PS Y11, A, X; \
	VFMADD231PS Y12, X, A; \
	VSUBPS MEAN+32*V(R8), A, A; \
	VMULPS RSTD+32*V(R8), A, T; \
	VFNMADD231PS STD+32*V(R8), T, A; \
	VFMADD231PS RSTD+32*V(R8), A, T

// NCHW_ARGS loads the NCHW kernels' arguments and constants, with the byte shuffles
// SR, SG and SB (red, green, blue) into Y13-Y15.
#define NCHW_ARGS(SR, SG, SB) \
	MOVQ red+0(FP), DI; \
	MOVQ green+8(FP), R10; \
	MOVQ blue+16(FP), R11; \
	MOVQ src+24(FP), SI; \
	MOVQ k+32(FP), R8; \
	MOVQ n+40(FP), CX; \
	VMOVUPS R255(R8), Y12; \
	VMOVUPS C255(R8), Y11; \
	VMOVDQU SR, Y13; \
	VMOVDQU SG, Y14; \
	VMOVDQU SB, Y15

// NCHW_STEP normalises the eight pixels in Y0, shuffled by Y13-Y15 into the samples of
// each channel, and stores them at output AX of each plane.
#define NCHW_STEP \
	VPSHUFB Y13, Y0, Y1; \
	VPSHUFB Y14, Y0, Y2; \
	VPSHUFB Y15, Y0, Y3; \
	NORM(Y1, Y4, Y7, 0); \
	NORM(Y2, Y5, Y8, 1); \
	NORM(Y3, Y6, Y9, 2); \
	VMOVUPS Y7, (DI)(AX*4); \
	VMOVUPS Y8, (R10)(AX*4); \
	VMOVUPS Y9, (R11)(AX*4)

// Byte shuffles taking pixel j of each 128-bit lane (bytes 3j..3j+2, j < 4) to dword j:
// its red, green or blue sample, zero-extended.
DATA shufR<>+0(SB)/8, $0x8080800380808000
DATA shufR<>+8(SB)/8, $0x8080800980808006
DATA shufR<>+16(SB)/8, $0x8080800380808000
DATA shufR<>+24(SB)/8, $0x8080800980808006
GLOBL shufR<>(SB), RODATA|NOPTR, $32

DATA shufG<>+0(SB)/8, $0x8080800480808001
DATA shufG<>+8(SB)/8, $0x8080800a80808007
DATA shufG<>+16(SB)/8, $0x8080800480808001
DATA shufG<>+24(SB)/8, $0x8080800a80808007
GLOBL shufG<>(SB), RODATA|NOPTR, $32

DATA shufB<>+0(SB)/8, $0x8080800580808002
DATA shufB<>+8(SB)/8, $0x8080800b80808008
DATA shufB<>+16(SB)/8, $0x8080800580808002
DATA shufB<>+24(SB)/8, $0x8080800b80808008
GLOBL shufB<>(SB), RODATA|NOPTR, $32

// func packNCHW32FMA(red, green, blue *float32, src *uint8, k *fmaConsts, n int)
TEXT ·packNCHW32FMA(SB), NOSPLIT, $0-48
	NCHW_ARGS(shufR<>(SB), shufG<>(SB), shufB<>(SB))
	XORQ AX, AX

nchwLoop:
	CMPQ AX, CX
	JGE nchwDone
	// Pixels 0-3 in the low lane, 4-7 (bytes 12-23, and 4 more read) in the high one.
	VMOVDQU (SI), X0
	VINSERTI128 $1, 12(SI), Y0, Y0
	NCHW_STEP
	ADDQ $24, SI
	ADDQ $8, AX
	JMP nchwLoop

nchwDone:
	VZEROUPPER
	RET

// func packNHWC32FMA(dst *float32, src *uint8, k *fmaConsts, n int)
TEXT ·packNHWC32FMA(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ k+16(FP), R8
	MOVQ n+24(FP), CX
	VMOVUPS R255(R8), Y12
	VMOVUPS C255(R8), Y11
	XORQ AX, AX

nhwcLoop:
	CMPQ AX, CX
	JGE nhwcDone
	VPMOVZXBD (SI)(AX*1), Y1
	VPMOVZXBD 8(SI)(AX*1), Y2
	VPMOVZXBD 16(SI)(AX*1), Y3
	NORM(Y1, Y4, Y7, 0)
	NORM(Y2, Y5, Y8, 1)
	NORM(Y3, Y6, Y9, 2)
	VMOVUPS Y7, (DI)(AX*4)
	VMOVUPS Y8, 32(DI)(AX*4)
	VMOVUPS Y9, 64(DI)(AX*4)
	ADDQ $24, AX
	JMP nhwcLoop

nhwcDone:
	VZEROUPPER
	RET

// Byte shuffles for the mirrored NCHW kernel: the low lane holds bytes 8-23 of a group of
// eight pixels (pixels 4-7 at offsets 4, 7, 10, 13), the high lane bytes 0-15 (pixels 0-3
// at 0, 3, 6, 9); dword j of the result is pixel 7-j's sample.
DATA mirR<>+0(SB)/8, $0x8080800a8080800d
DATA mirR<>+8(SB)/8, $0x8080800480808007
DATA mirR<>+16(SB)/8, $0x8080800680808009
DATA mirR<>+24(SB)/8, $0x8080800080808003
GLOBL mirR<>(SB), RODATA|NOPTR, $32

DATA mirG<>+0(SB)/8, $0x8080800b8080800e
DATA mirG<>+8(SB)/8, $0x8080800580808008
DATA mirG<>+16(SB)/8, $0x808080078080800a
DATA mirG<>+24(SB)/8, $0x8080800180808004
GLOBL mirG<>(SB), RODATA|NOPTR, $32

DATA mirB<>+0(SB)/8, $0x8080800c8080800f
DATA mirB<>+8(SB)/8, $0x8080800680808009
DATA mirB<>+16(SB)/8, $0x808080088080800b
DATA mirB<>+24(SB)/8, $0x8080800280808005
GLOBL mirB<>(SB), RODATA|NOPTR, $32

// func packNCHW32FMAMirror(red, green, blue *float32, src *uint8, k *fmaConsts, n int)
TEXT ·packNCHW32FMAMirror(SB), NOSPLIT, $0-48
	NCHW_ARGS(mirR<>(SB), mirG<>(SB), mirB<>(SB))
	// The last group of eight source pixels first.
	LEAQ -8(CX), BX
	LEAQ (BX)(BX*2), BX
	ADDQ BX, SI
	XORQ AX, AX

mirLoop:
	CMPQ AX, CX
	JGE mirDone
	VMOVDQU 8(SI), X0
	VINSERTI128 $1, (SI), Y0, Y0
	NCHW_STEP
	SUBQ $24, SI
	ADDQ $8, AX
	JMP mirLoop

mirDone:
	VZEROUPPER
	RET
