//go:build !((darwin || freebsd || linux) && !android && (amd64 || arm64))

package turbojpeg

import (
	"errors"
	"unsafe"
)

// On platforms purego does not support without cgo, Load always fails and
// the call wrappers are unreachable.

const libName = "libturbojpeg"

func dlopen(string) (uintptr, error) {
	return 0, errors.New("run-time loading not supported on this platform")
}

func dlsym(uintptr, string) (uintptr, error) { return 0, errors.New("unsupported") }

func tjInitDecompress(uintptr) uintptr { return 0 }
func tjDestroy(uintptr, uintptr) int   { return -1 }
func tjDecompressHeader3(uintptr, uintptr, unsafe.Pointer, uintptr, unsafe.Pointer, unsafe.Pointer, unsafe.Pointer, unsafe.Pointer) int {
	return -1
}
func tjDecompress2(uintptr, uintptr, unsafe.Pointer, uintptr, unsafe.Pointer, int, int, int, int, int) int {
	return -1
}
func tjGetScalingFactors(uintptr, unsafe.Pointer) uintptr { return 0 }
func tjDecompressToYUVPlanes(uintptr, uintptr, unsafe.Pointer, uintptr, unsafe.Pointer, int, unsafe.Pointer, int, int) int {
	return -1
}
func tjGetErrorStr(uintptr) uintptr           { return 0 }
func tjGetErrorStr2(uintptr, uintptr) uintptr { return 0 }
func tjGetErrorCode(uintptr, uintptr) int     { return 1 }
