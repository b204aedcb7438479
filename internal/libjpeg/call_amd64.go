//go:build (darwin || freebsd || linux) && !android

package libjpeg

// Addresses of the C-convention functions in call_amd64.s.
var jpegCallPC, jpegErrorExitPC, jpegEmitMessagePC uintptr

const haveTrampoline = true
