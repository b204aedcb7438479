// Package cmem returns memory that C libraries have freed to the system.
//
// The native decoders (libjpeg-turbo, libwebp) allocate their working memory with the C
// allocator: a progressive JPEG's coefficients, a lossless WebP's pixels, tens of
// megabytes for a large photo. glibc keeps what they free in its heaps for later
// allocations, one heap per thread that allocated, so after large images on several
// threads the process stays that much larger, and grows as images land on other
// threads. Trim asks glibc to give free pages back (malloc_trim(0)); LimitArenas and
// MapLarge change where it keeps large blocks (mallopt). Where the C library is not
// glibc, or libraries cannot be loaded at run time, they do nothing and report false.
package cmem

import (
	"sync"

	"github.com/conveyor-ml/conveyor/internal/dl"
)

// glibcFunc returns the address of glibc's function name, or 0 where there is none.
func glibcFunc(name string) func() uintptr {
	return sync.OnceValue(func() uintptr {
		if !dl.Supported {
			return 0
		}
		h, err := dl.Open("libc.so.6")
		if err != nil {
			return 0
		}
		fn, err := dl.Sym(h, name)
		if err != nil {
			return 0
		}
		return fn
	})
}

var (
	mallocTrim = glibcFunc("malloc_trim")
	mallopt    = glibcFunc("mallopt")
)

// Supported reports whether Trim can return memory: the C library is glibc.
func Supported() bool { return mallocTrim() != 0 }

// Trim gives the free memory of the C allocator's heaps back to the system and reports
// whether any was: glibc's malloc_trim(0). It takes each heap's lock in turn, for about
// as long as walking its free chunks takes (well under a millisecond for a decoder's
// heaps). Where the C library is not glibc it does nothing and reports false.
func Trim() bool {
	fn := mallocTrim()
	if fn == 0 {
		return false
	}
	return int32(dl.Call(fn, 0)) != 0
}

// glibc's mallopt parameters.
const (
	arenaMax      = -8 // M_ARENA_MAX
	mmapThreshold = -3 // M_MMAP_THRESHOLD
)

// setOption calls glibc's mallopt(param, value) and reports whether it was accepted.
func setOption(param int32, value int) bool {
	fn := mallopt()
	if fn == 0 {
		return false
	}
	return int32(dl.Call(fn, uintptr(uint32(param)), uintptr(value))) == 1
}

// LimitArenas has the C allocator keep at most n heaps (arenas) and reports whether it
// could (glibc's mallopt(M_ARENA_MAX, n)). glibc makes a heap per thread that allocates
// while the others are busy, up to eight per core, and each keeps what was freed in it:
// a decoder's working memory for a large image, freed, stays in the heap of the thread
// that decoded it, and as large images land on other threads the process grows by a
// large image's memory per heap. With few heaps that memory is reused across threads.
// Heaps made before the call stay. It applies to the whole process's C allocations.
func LimitArenas(n int) bool { return setOption(arenaMax, n) }

// MapLarge has the C allocator serve every allocation of at least n bytes with a memory
// mapping of its own, unmapped when it is freed, and reports whether it could (glibc's
// mallopt(M_MMAP_THRESHOLD, n)). glibc's threshold starts at 128 KiB and rises to the
// size of each mapped block freed, up to 32 MiB, so a decoder's working memory for a
// large image soon comes from its heaps, which keep it after it is freed, in pieces
// among blocks still in use that Trim cannot return. A mapping costs page faults each
// time a block is used. It applies to the whole process's C allocations.
func MapLarge(n int) bool { return setOption(mmapThreshold, n) }
