//go:build !linux

package main

import "time"

// cpuTime is not measured on this system.
func cpuTime() (user, sys time.Duration) { return 0, 0 }

func resetPeakRSS() bool { return false }

// peakRSS is not measured on this system.
func peakRSS() int64 { return 0 }

// residentSplit is not measured on this system.
func residentSplit() (anon, file, shmem int64, ok bool) { return 0, 0, 0, false }
