package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// resetPeakRSS starts a new peak-RSS measurement, so each run of a sweep reports its own
// (Linux ≥ 4.0: writing 5 to clear_refs resets the high-water mark). It reports whether
// it could; if not, peakRSS is the process's peak so far.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is the process's resident-set high-water mark in bytes since resetPeakRSS.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
				f := bytes.Fields(v) // "123456 kB"
				if n, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil && len(f) == 2 {
					return n << 10
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}
