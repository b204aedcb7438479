// Package dl opens shared libraries and calls their C functions at run time without cgo,
// through github.com/ebitengine/purego on the platforms it supports (Linux, macOS and
// FreeBSD on amd64 and arm64). Elsewhere Open fails and the optional native decoders
// that use it stay off.
package dl

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// Name returns the file name of a library on this OS: linux (also FreeBSD) or darwin.
func Name(linux, darwin string) string {
	if runtime.GOOS == "darwin" {
		return darwin
	}
	return linux
}

// Bind opens the library name and stores the address of each symbol in syms into its
// pointer. Errors name the library and every missing symbol, prefixed with pkg.
func Bind(pkg, name string, syms map[string]*uintptr) error {
	h, err := Open(name)
	if err != nil {
		return fmt.Errorf("%s: cannot open %s: %w", pkg, name, err)
	}
	var missing []string
	for s, p := range syms {
		addr, err := Sym(h, s)
		if err != nil || addr == 0 {
			missing = append(missing, s)
			continue
		}
		*p = addr
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%s: %s lacks %s", pkg, name, strings.Join(missing, ", "))
	}
	return nil
}
