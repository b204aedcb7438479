//go:build (darwin || freebsd || linux) && !android

package dl

import "unsafe"

// frameCallPC is the address of frameCall in frame_amd64.s.
var frameCallPC uintptr

//go:linkname runtimeCgocall runtime.cgocall
func runtimeCgocall(fn uintptr, arg unsafe.Pointer) int32

// Call calls f.Fn with f.Args and returns its result, which it also stores in f.Ret. It
// allocates nothing (Call allocates twice in purego): for calls made in a loop, such as
// polling a GPU event. f must not be on the stack (new it once and keep it), and the
// memory its arguments point to must be kept alive by the caller until Call returns.
func (f *Frame) Call() uintptr {
	runtimeCgocall(frameCallPC, unsafe.Pointer(f))
	return f.Ret
}
