//go:build (darwin || freebsd || linux) && !android

#include "textflag.h"

// frameCall is run by runtime.cgocall on the system stack with the address of a Frame in
// DI (System V AMD64): it calls Frame.Fn with Frame.Args in the six integer argument
// registers and stores the result in Frame.Ret. BX is callee-saved, so it keeps the frame
// across the call; pushing it also aligns the stack to 16 bytes at the CALL.
//
// Frame layout: Fn at 0, Args[0..5] at 8..48, Ret at 56.

GLOBL ·frameCallPC(SB), NOPTR|RODATA, $8
DATA ·frameCallPC(SB)/8, $frameCall<>(SB)

TEXT frameCall<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BX
	MOVQ  DI, BX
	MOVQ  0(BX), AX
	MOVQ  8(BX), DI
	MOVQ  16(BX), SI
	MOVQ  24(BX), DX
	MOVQ  32(BX), CX
	MOVQ  40(BX), R8
	MOVQ  48(BX), R9
	CALL  AX
	MOVQ  AX, 56(BX)
	POPQ  BX
	RET
