package main

import (
	"runtime/metrics"
	"sync"
)

// memSample is the process's memory at one moment: what is resident, split as the
// kernel splits it (anonymous pages — the Go heap, the pinned batch buffers, C
// libraries' allocations —, pages of mapped files, shared memory), and what of it the
// Go runtime holds.
type memSample struct {
	Anon, File, Shmem int64 // resident bytes (/proc/self/status RssAnon, RssFile, RssShmem)
	Heap              int64 // Go heap spans in use: objects, live or not yet swept, and their spans' free slots
	Go                int64 // all the Go runtime has mapped and not given back to the system
}

// goMetrics are the runtime/metrics memSample reads.
var goMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
}

// memSampler keeps the peaks of memSamples taken during a run, over the run and over
// the epoch in progress. Sampling misses peaks shorter than its period, so the peaks it
// reports are lower bounds; the resident high-water mark (VmHWM) is exact. Safe for
// concurrent use.
type memSampler struct {
	mu    sync.Mutex
	ms    []metrics.Sample
	ok    bool // the system reports its resident memory split
	peak  memSample
	epoch int64 // peak anonymous bytes in the epoch in progress
}

func newMemSampler() *memSampler {
	s := &memSampler{ms: make([]metrics.Sample, len(goMetrics))}
	for i, n := range goMetrics {
		s.ms[i].Name = n
	}
	return s
}

// sample takes one memSample and raises the peaks.
func (s *memSampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	metrics.Read(s.ms)
	v := func(i int) int64 {
		if s.ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s.ms[i].Value.Uint64())
	}
	m := memSample{Heap: v(0) + v(1), Go: v(2) - v(3)}
	m.Anon, m.File, m.Shmem, s.ok = residentSplit()
	s.peak.Anon = max(s.peak.Anon, m.Anon)
	s.peak.File = max(s.peak.File, m.File)
	s.peak.Shmem = max(s.peak.Shmem, m.Shmem)
	s.peak.Heap = max(s.peak.Heap, m.Heap)
	s.peak.Go = max(s.peak.Go, m.Go)
	s.epoch = max(s.epoch, m.Anon)
}

// endEpoch samples once more, records the epoch's peak anonymous bytes and starts the
// next epoch's, returning the one recorded.
func (s *memSampler) endEpoch() int64 {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.epoch
	s.epoch = 0
	return p
}

// peaks returns the run's peaks and whether the resident split was measured.
func (s *memSampler) peaks() (memSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.ok
}
