//go:build !unix

package pipeline

import "time"

// processCPU is not measured here: the tuner adds no CPU workers.
func processCPU() (time.Duration, bool) { return 0, false }
