package pipeline

import (
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// retained holds what TestReturner allocates, so that the compiler cannot drop it.
var retained []byte

// allocate allocates n bytes into retained and writes one byte of each page, so that all
// of it is resident.
func allocate(n int) {
	retained = make([]byte, n)
	for i := 0; i < n; i += 4096 {
		retained[i] = 1
	}
}

// The returner gives garbage back once the process nears its limit, not before, and
// backs off when what is resident is not garbage.
func TestReturner(t *testing.T) {
	if _, ok := anonResident(); !ok {
		t.Skip("no /proc/self/statm here: the returner does not run")
	}
	const budget, size = 64 << 20, 192 << 20
	debug.FreeOSMemory() // what earlier tests left is not resident
	r := newReturner(budget)
	start := r.limit.Load() - budget
	var mu sync.Mutex
	now := time.Now()
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	at := func(d time.Duration) time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(d); return now }
	runs := func(want int64, what string) {
		t.Helper()
		r.wait()
		if got := r.runs.Load(); got != want {
			t.Fatalf("%s: %d returns, want %d", what, got, want)
		}
	}

	allocate(16 << 20)
	retained = nil
	r.check(at(time.Second))
	runs(0, "below the limit")

	allocate(size)
	held, _ := anonResident()
	if held-start < size/2 {
		t.Skipf("allocating %d bytes raised anonymous memory by only %d", size, held-start)
	}
	retained = nil
	r.check(at(time.Second))
	runs(1, "near the limit with garbage")
	if after, _ := anonResident(); held-after < size/2 {
		t.Fatalf("anonymous memory %d before the return, %d after: want at least %d less", held, after, size/2)
	}
	if raceEnabled {
		return // the race detector's shadow of what was allocated stays resident: no longer under the limit
	}
	r.check(at(time.Second))
	runs(1, "back under the limit")

	// Memory the program keeps: the return finds nothing to give back and the next
	// waits minBackoff, then twice that.
	allocate(size)
	kept := retained
	r.check(at(time.Second))
	runs(2, "near the limit with memory kept")
	if r.backoff != minBackoff {
		t.Fatalf("backoff %v after a return that ended past the limit, want %v", r.backoff, minBackoff)
	}
	r.check(at(minBackoff / 2))
	runs(2, "within the backoff")
	r.check(at(minBackoff))
	runs(3, "after the backoff")
	if r.backoff != 2*minBackoff {
		t.Errorf("backoff %v after two returns past the limit, want %v", r.backoff, 2*minBackoff)
	}
	kept[0] = 2
	retained = nil
}
