//go:build !((darwin || freebsd || linux) && !android && amd64)

package libjpeg

var jpegCallPC, jpegErrorExitPC, jpegEmitMessagePC uintptr

// haveTrampoline is false where there is no setjmp-like call for libjpeg's errors
// (call_amd64.s): Load then fails and callers use TurboJPEG.
const haveTrampoline = false
