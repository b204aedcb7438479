// Package leakcheck fails a test binary whose tests leave goroutines running.
package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Main runs m's tests, then the cleanup functions (for what tests share across the
// package, such as a fixture directory), then waits up to two seconds for the goroutine
// count to fall back to what it was before them; if it does not, it prints every
// goroutine's stack and exits with status 1. Call it from TestMain.
func Main(m *testing.M, cleanup ...func()) {
	before := runtime.NumGoroutine()
	code := m.Run()
	for _, f := range cleanup {
		f()
	}
	if code == 0 && !fuzzing() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "goroutine leak: %d before, %d after\n%s\n", before, n, buf)
			code = 1
		}
	}
	os.Exit(code)
}

// fuzzing reports whether the binary ran as a fuzz coordinator or worker (-test.fuzz):
// those keep goroutines of their own (a signal handler, the worker's connection) past
// m.Run, and a fuzz worker that waited here would stall the fuzzer.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}
