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

// residentSplit reads the process's resident bytes by kind from /proc/self/status
// (Linux ≥ 4.5): anonymous, file-backed and shared memory.
func residentSplit() (anon, file, shmem int64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, 0, false
	}
	found := 0
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("RssAnon:")):
			dst = &anon
		case bytes.HasPrefix(line, []byte("RssFile:")):
			dst = &file
		case bytes.HasPrefix(line, []byte("RssShmem:")):
			dst = &shmem
		default:
			continue
		}
		if v, ok := statusKB(line); ok {
			*dst = v
			found++
		}
	}
	return anon, file, shmem, found == 3
}

// statusKB parses the value of a /proc/PID/status line "Name:   123456 kB" in bytes.
func statusKB(line []byte) (int64, bool) {
	_, v, _ := bytes.Cut(line, []byte{':'})
	f := bytes.Fields(v)
	if len(f) != 2 || string(f[1]) != "kB" {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	return n << 10, err == nil
}

// peakRSS is the process's resident-set high-water mark in bytes since resetPeakRSS.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte("VmHWM:")) {
				if n, ok := statusKB(sc.Bytes()); ok {
					return n
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
