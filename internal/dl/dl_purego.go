//go:build (darwin || freebsd || linux) && !android && (amd64 || arm64)

package dl

import "github.com/ebitengine/purego"

// Supported reports whether this platform can load libraries at run time.
const Supported = true

// Open opens the shared library name (RTLD_NOW, RTLD_LOCAL). Libraries are never closed.
func Open(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// Sym returns the address of symbol name in the library h.
func Sym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// Call calls the C function fn with integer or pointer arguments and returns its integer
// or pointer result (C ints are 32 bits: truncate it to int32). Pass Go memory as
// uintptr(unsafe.Pointer(p)) written in the call expression itself: like purego.SyscallN,
// Call is marked //go:uintptrescapes, so the memory stays alive and in place until it
// returns.
//
//go:uintptrescapes
func Call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
