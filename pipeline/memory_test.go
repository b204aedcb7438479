package pipeline

import (
	"runtime"
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

// The garbage meter collects once what was dropped since the last collection reaches its
// limit, and a collection the runtime makes by itself clears the count.
func TestDroppedCollects(t *testing.T) {
	watchGC()
	r := &returner{garbageLimit: 100}
	start := gcCycles.Load()
	r.garbageCycle.Store(start)
	r.dropped(60)
	if r.collections.Load() != 0 || r.garbage.Load() != 60 {
		t.Fatalf("after 60 of 100: %d collections, %d counted", r.collections.Load(), r.garbage.Load())
	}
	r.dropped(0)
	r.dropped(-5)
	before := gcCycles.Load()
	r.dropped(50)
	if before >= start+2 {
		t.Skip("the runtime collected twice during the test, clearing the count")
	}
	if r.collections.Load() != 1 || r.garbage.Load() != 0 {
		t.Fatalf("after 110 of 100: %d collections, %d counted", r.collections.Load(), r.garbage.Load())
	}
	// The watcher saw the collection (its cleanup runs soon after it).
	deadline := time.Now().Add(5 * time.Second)
	for gcCycles.Load() == before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if gcCycles.Load() == before {
		t.Fatal("gcCycles did not advance after a collection")
	}
	r.dropped(90)
	for range 2 { // the runtime collects by itself, twice
		c := gcCycles.Load()
		runtime.GC()
		for gcCycles.Load() == c && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	r.dropped(20) // 110 without the runtime's collections, 20 after them
	if r.collections.Load() != 1 || r.garbage.Load() != 20 {
		t.Errorf("after the runtime's collections: %d collections, %d counted, want 1 and 20", r.collections.Load(), r.garbage.Load())
	}
	var off returner // no budget: never collects
	off.dropped(1 << 40)
	if off.collections.Load() != 0 {
		t.Error("a returner without a limit collected")
	}
}
