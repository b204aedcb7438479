//go:build (darwin || freebsd || linux) && !android && (amd64 || arm64)

package turbojpeg

import (
	"runtime"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
	"github.com/ebitengine/purego"
)

var libName = func() string {
	if runtime.GOOS == "darwin" {
		return "libturbojpeg.0.dylib"
	}
	return "libturbojpeg.so.0"
}()

func dlopen(name string) (uintptr, error) { return dl.Open(name) }

func dlsym(h uintptr, name string) (uintptr, error) { return dl.Sym(h, name) }

// The wrappers below take Go memory as unsafe.Pointer, so it stays visible to
// the garbage collector, and convert it to uintptr inside the call to
// purego.SyscallN, which is marked //go:uintptrescapes: the pointed-to memory
// is kept alive and in place for the duration of the C call. SyscallN costs
// two small heap allocations per call (its argument block and variadic
// slice), far fewer than purego.RegisterFunc, which goes through reflect.
// C ints are 32 bits: results are truncated to int32, arguments are passed in
// 64-bit registers whose upper half C ignores.

func tjInitDecompress(fn uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn)
	return r
}

func tjDestroy(fn, h uintptr) int {
	r, _, _ := purego.SyscallN(fn, h)
	return int(int32(r))
}

func tjDecompressHeader3(fn, h uintptr, buf unsafe.Pointer, size uintptr, w, ht, subsamp, cs unsafe.Pointer) int {
	r, _, _ := purego.SyscallN(fn, h, uintptr(buf), size,
		uintptr(w), uintptr(ht), uintptr(subsamp), uintptr(cs))
	return int(int32(r))
}

func tjDecompress2(fn, h uintptr, buf unsafe.Pointer, size uintptr, dst unsafe.Pointer, w, pitch, ht, pf, flags int) int {
	r, _, _ := purego.SyscallN(fn, h, uintptr(buf), size, uintptr(dst),
		uintptr(w), uintptr(pitch), uintptr(ht), uintptr(pf), uintptr(flags))
	return int(int32(r))
}

func tjDecompressToYUVPlanes(fn, h uintptr, buf unsafe.Pointer, size uintptr, planes unsafe.Pointer, w int, strides unsafe.Pointer, ht, flags int) int {
	r, _, _ := purego.SyscallN(fn, h, uintptr(buf), size, uintptr(planes),
		uintptr(w), uintptr(strides), uintptr(ht), uintptr(flags))
	return int(int32(r))
}

func tjGetScalingFactors(fn uintptr, n unsafe.Pointer) uintptr {
	r, _, _ := purego.SyscallN(fn, uintptr(n))
	return r
}

func tjGetErrorStr(fn uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn)
	return r
}

func tjGetErrorStr2(fn, h uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, h)
	return r
}

func tjGetErrorCode(fn, h uintptr) int {
	r, _, _ := purego.SyscallN(fn, h)
	return int(int32(r))
}
