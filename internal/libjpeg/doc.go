// Package libjpeg decodes JPEG files with libjpeg-turbo's libjpeg API (libjpeg.so.62 or
// libjpeg.so.8), found at run time through purego like internal/turbojpeg, for what the
// TurboJPEG API cannot do: stop decoding below the rows a caller needs. A random crop of
// a training image rarely reaches its last row, and the entropy-coded data below the
// crop is then never read: on ImageNet-sized photos about a sixth of the decode.
//
// libjpeg reports errors by calling a handler that must not return (C programs longjmp
// to a setjmp taken before the call); a Go function cannot be that handler. Each call
// into the library goes through a small trampoline in the C calling convention
// (call_amd64.s) that saves the callee-saved registers and stack pointer, and the
// handlers installed in the error manager restore them and return from the trampoline
// with an error code, dropping libjpeg's frames as longjmp would; the decompressor is
// then destroyed, as libjpeg's documentation prescribes. Warnings (a truncated file,
// corrupt entropy data) stop the decode too, as TurboJPEG's TJFLAG_STOPONWARNING does.
//
// Only amd64 has the trampoline; elsewhere [Load] fails and callers decode with
// TurboJPEG. The structure offsets are those of libjpeg-turbo's ABI 6.2 and 8 on
// x86-64 (TestLayout checks them against jpeglib.h where a C compiler and the headers
// are present).
package libjpeg
