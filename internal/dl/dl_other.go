//go:build !((darwin || freebsd || linux) && !android && (amd64 || arm64))

package dl

import "errors"

// Supported reports whether this platform can load libraries at run time.
const Supported = false

// Open always fails on this platform.
func Open(string) (uintptr, error) {
	return 0, errors.New("run-time loading not supported on this platform")
}

// Sym always fails on this platform.
func Sym(uintptr, string) (uintptr, error) { return 0, errors.New("unsupported") }

// Call is unreachable on this platform (Open fails first); it returns 0.
func Call(uintptr, ...uintptr) uintptr { return 0 }
