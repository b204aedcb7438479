//go:build amd64 && !purego

#include "textflag.h"

// PNG unfiltering for 3- and 4-byte pixels, one pixel per step with the channels in 16-bit
// lanes: Sub, Average and Paeth depend on the pixel to the left, so a row is a chain of
// pixels, but each pixel's channels are independent. Each step reads 4 bytes at the
// pixel; for 3-byte pixels the fourth lane is the next pixel's first byte, computed on
// but stored back as it was read. Sums are byte adds (VPADDB), which wrap as PNG's
// arithmetic does and leave the lanes' high bytes zero, one instruction on the chain from
// one pixel to the next.

// The lanes stored back unchanged: the fourth for 3-byte pixels, none for 4-byte ones.
DATA keep3<>+0(SB)/8, $0xffff000000000000
DATA keep3<>+8(SB)/8, $0
GLOBL keep3<>(SB), RODATA|NOPTR, $16

// NEXT stores the pixel just unfiltered (X0; a 3-byte pixel's fourth byte as read, from
// X3) and moves to the next, loading its filtered bytes into X3 first: a load after the
// store would overlap it by a byte and wait for it (a failed store forward, about 5 ns).
#define NEXT \
	VPBLENDVB X7, X3, X0, X14; \
	LEAQ (AX)(DX*1), R9; \
	VMOVD (DI)(R9*1), X3; \
	VPMOVZXBW X3, X3; \
	VPACKUSWB X14, X14, X14; \
	VMOVD X14, (DI)(AX*1); \
	MOVQ R9, AX

// func unfilterAVX(filter int, cur, prev *byte, pixels, bpp int)
// Unfilters pixels 1..pixels of cur (pixel 0 done) with filter 1 (Sub), 3 (Average) or 4
// (Paeth); bpp is 3 or 4, and 4 bytes must be readable at pixels 0..pixels+1 of cur and
// prev.
TEXT ·unfilterAVX(SB), NOSPLIT, $0-40
	MOVQ filter+0(FP), BX
	MOVQ cur+8(FP), DI
	MOVQ prev+16(FP), SI
	MOVQ pixels+24(FP), CX
	MOVQ bpp+32(FP), DX
	VPXOR X7, X7, X7
	CMPQ DX, $4
	JEQ masked
	VMOVDQU keep3<>(SB), X7

masked:
	VMOVD (DI), X0
	VPMOVZXBW X0, X0 // a: the pixel to the left
	VMOVD (SI), X1
	VPMOVZXBW X1, X1 // c: the pixel above a
	MOVQ DX, AX      // offset of the pixel
	TESTQ CX, CX
	JLE done
	VMOVD (DI)(AX*1), X3
	VPMOVZXBW X3, X3 // x: the pixel, filtered
	CMPQ BX, $1
	JEQ sub
	CMPQ BX, $3
	JEQ avg

paeth:
	VMOVD (SI)(AX*1), X2
	VPMOVZXBW X2, X2 // b: above
	VPSUBW X1, X2, X4 // b - c
	VPSUBW X1, X0, X5 // a - c
	VPADDW X4, X5, X8 // a + b - 2c
	VPABSW X4, X4     // pa
	VPABSW X5, X5     // pb
	VPABSW X8, X8     // pc
	VPCMPGTW X8, X5, X9          // pb > pc
	VPBLENDVB X9, X1, X2, X10    // pb > pc ? c : b
	VPMINSW X8, X5, X11          // min(pb, pc)
	VPCMPGTW X11, X4, X12        // pa > min(pb, pc)
	VPBLENDVB X12, X10, X0, X13  // the predictor
	VPADDB X13, X3, X0
	NEXT
	VMOVDQA X2, X1
	DECQ CX
	JNZ paeth
	JMP done

sub:
	VPADDB X0, X3, X0
	NEXT
	DECQ CX
	JNZ sub
	JMP done

avg:
	VMOVD (SI)(AX*1), X2
	VPMOVZXBW X2, X2
	VPADDW X2, X0, X13
	VPSRLW $1, X13, X13
	VPADDB X13, X3, X0
	NEXT
	DECQ CX
	JNZ avg

done:
	RET
