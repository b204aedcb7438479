//go:build (darwin || freebsd || linux) && !android

#include "textflag.h"

// libjpeg reports a fatal error by calling the error manager's error_exit, which must not
// return: C programs longjmp back to a setjmp taken before the call. These three functions
// do the same for Go, in the C calling convention (System V AMD64), run by purego on the
// system stack like any C function.
//
// jpegCall(jb, fn, a1, a2, a3) saves the callee-saved registers on its own stack, stores
// the stack pointer in jb[0], clears jb[1] and calls fn(a1, a2, a3); it returns fn's result.
// jpegErrorExit(cinfo) and jpegEmitMessage(cinfo, level) (only for level < 0, a warning)
// find jb in cinfo->client_data, store 1 (error) or 2 (warning) in jb[1], and return from
// jpegCall with 0, popping every frame libjpeg had pushed. Nothing of Go runs between the
// two: the frames dropped are libjpeg's, whose memory the caller then frees with
// jpeg_destroy_decompress, as libjpeg's documentation prescribes after a longjmp.

#define CLIENT_DATA 24

GLOBL ·jpegCallPC(SB), NOPTR|RODATA, $8
DATA ·jpegCallPC(SB)/8, $jpegCall<>(SB)
GLOBL ·jpegErrorExitPC(SB), NOPTR|RODATA, $8
DATA ·jpegErrorExitPC(SB)/8, $jpegErrorExit<>(SB)
GLOBL ·jpegEmitMessagePC(SB), NOPTR|RODATA, $8
DATA ·jpegEmitMessagePC(SB)/8, $jpegEmitMessage<>(SB)

TEXT jpegCall<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	PUSHQ BX
	PUSHQ R12
	PUSHQ R13
	PUSHQ R14
	PUSHQ R15
	SUBQ  $8, SP // 16-byte alignment at the call below
	MOVQ  SP, 0(DI)
	MOVQ  $0, 8(DI)
	MOVQ  SI, AX
	MOVQ  DX, DI
	MOVQ  CX, SI
	MOVQ  R8, DX
	CALL  AX
	ADDQ  $8, SP
	POPQ  R15
	POPQ  R14
	POPQ  R13
	POPQ  R12
	POPQ  BX
	POPQ  BP
	RET

// UNWIND returns from jpegCall with 0, jb in AX and the code in jb[1]: it restores the
// stack pointer jpegCall saved, the registers it pushed (loaded, not popped, because the
// assembler balances each function's own pushes and pops), and returns to its caller.
#define UNWIND \
	MOVQ 0(AX), SP;   \
	XORL AX, AX;      \
	MOVQ 8(SP), R15;  \
	MOVQ 16(SP), R14; \
	MOVQ 24(SP), R13; \
	MOVQ 32(SP), R12; \
	MOVQ 40(SP), BX;  \
	MOVQ 48(SP), BP;  \
	ADDQ $56, SP;     \
	RET

TEXT jpegErrorExit<>(SB), NOSPLIT|NOFRAME, $0
	MOVQ CLIENT_DATA(DI), AX
	MOVQ $1, 8(AX)
	UNWIND

TEXT jpegEmitMessage<>(SB), NOSPLIT|NOFRAME, $0
	CMPL SI, $0
	JGE  trace
	MOVQ CLIENT_DATA(DI), AX
	MOVQ $2, 8(AX)
	UNWIND

trace:
	RET
