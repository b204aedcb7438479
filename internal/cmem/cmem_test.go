package cmem

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/dl"
)

// rssAnon is the process's resident anonymous memory in bytes (Linux).
func rssAnon(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	_, v, ok := bytes.Cut(b, []byte("RssAnon:"))
	if !ok {
		t.Skip("no RssAnon in /proc/self/status")
	}
	f := bytes.Fields(v)
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n << 10
}

// Memory malloc'd in small chunks, written and freed stays resident in glibc's heap
// (a chunk still allocated above it keeps it from being trimmed at the top) until Trim
// gives it back.
func TestTrim(t *testing.T) {
	if runtime.GOOS != "linux" || !Supported() {
		t.Skip("cmem: no glibc malloc_trim here (not Linux with glibc, or no run-time loading); Trim does nothing")
	}
	runtime.LockOSThread() // one thread, so one C heap
	defer runtime.UnlockOSThread()
	h, err := dl.Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	sym := func(name string) uintptr {
		fn, err := dl.Sym(h, name)
		if err != nil {
			t.Fatal(err)
		}
		return fn
	}
	malloc, free, memset := sym("malloc"), sym("free"), sym("memset")
	const chunk, n = 64 << 10, 1024 // 64 MiB in chunks below glibc's mmap threshold
	before := rssAnon(t)
	ptrs := make([]uintptr, n+1)
	for i := range ptrs {
		if ptrs[i] = dl.Call(malloc, chunk); ptrs[i] == 0 {
			t.Fatal("malloc failed")
		}
		dl.Call(memset, ptrs[i], 1, chunk)
	}
	for _, p := range ptrs[:n] {
		dl.Call(free, p)
	}
	defer dl.Call(free, ptrs[n])
	held := rssAnon(t)
	if held-before < n*chunk/2 {
		t.Skipf("glibc gave the freed memory back by itself (%d → %d bytes resident): nothing to trim", before, held)
	}
	if !Trim() {
		t.Errorf("Trim reports nothing freed with %d bytes free in the heap", n*chunk)
	}
	if after := rssAnon(t); held-after < n*chunk/2 {
		t.Errorf("resident anonymous memory %d before Trim, %d after: want at least %d less", held, after, n*chunk/2)
	}
}

// With MapLarge, a large block freed leaves nothing resident behind, where glibc would
// keep it in its heap once its dynamic threshold has risen; LimitArenas is accepted.
func TestMallopt(t *testing.T) {
	if runtime.GOOS != "linux" || !Supported() {
		t.Skip("cmem: no glibc here (not Linux with glibc, or no run-time loading)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := dl.Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	malloc, _ := dl.Sym(h, "malloc")
	free, _ := dl.Sym(h, "free")
	memset, _ := dl.Sym(h, "memset")
	// A 30 MiB block, mapped and freed, raises glibc's threshold to 30 MiB: blocks
	// below it come from the heap from then on.
	dl.Call(free, dl.Call(malloc, 30<<20))
	if !LimitArenas(2) {
		t.Error("mallopt(M_ARENA_MAX, 2) refused")
	}
	if !MapLarge(1 << 20) {
		t.Fatal("mallopt(M_MMAP_THRESHOLD, 1 MiB) refused")
	}
	const n = 16 << 20
	before := rssAnon(t)
	p := dl.Call(malloc, n)
	keep := dl.Call(malloc, 64) // a block after it, as a decoder's next would be
	defer dl.Call(free, keep)
	dl.Call(memset, p, 1, n)
	held := rssAnon(t)
	dl.Call(free, p)
	if after := rssAnon(t); held-before < n/2 || held-after < n/2 {
		t.Errorf("resident anonymous memory %d, %d with a %d-byte block, %d once freed: want it given back", before, held, n, after)
	}
}
