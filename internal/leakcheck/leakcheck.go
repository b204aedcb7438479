// Package leakcheck fails a test binary whose tests leave goroutines running.
package leakcheck

import (
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
	if code == 0 {
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
