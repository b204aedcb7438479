//go:build !linux

package pinned

import (
	"errors"
	"unsafe"
)

// mapSlab falls back to the Go heap, over-allocating by a page to align the start: the
// Go allocator never moves heap objects, so the alignment holds for the slab's life.
func mapSlab(size int) ([]byte, error) {
	b := make([]byte, size+pageSize-1)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(pageSize-1)); r != 0 {
		off = pageSize - r
	}
	return b[off : off+size : off+size], nil
}

// unmapSlab drops the reference; the garbage collector frees the memory.
func unmapSlab([]byte) error { return nil }

var errNoLock = errors.New("pinned: page locking is not implemented on this OS; using unlocked memory")

func lockSlabs([]*slab) error { return errNoLock }
