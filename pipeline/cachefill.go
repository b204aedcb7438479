package pipeline

import (
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

// store puts a freshly decoded sample in the cache when the fill share allows, and
// returns the time it finished.
func (w *worker) store(l *Loader, it readItem, img *decode.Image, t0 time.Time) time.Time {
	if !l.fill.admit(l.cfg.CacheFill) {
		l.stats.cacheDeferred.Add(1)
		return t0
	}
	err := w.coder.Put(it.key, l.src.Label(it.idx), img)
	t1 := time.Now()
	l.fill.fill.Add(int64(t1.Sub(t0)))
	switch {
	case err == nil:
		l.stats.cacheStored.Add(1)
	case cache.Refused(err):
		// The cache logged why once; the epoch carries on from the sources.
	default:
		l.cfg.Logf("pipeline: caching %s: %v", it.key.Path, err)
	}
	return t1
}

// fillMeter shares worker time between the epoch's work and filling the cache.
type fillMeter struct {
	busy, fill atomic.Int64 // nanoseconds summed over workers
	// idle is the time the dispatcher waited for a free batch buffer, times the number
	// of workers: time they would otherwise idle because the consumer is slower. A
	// worker's own waits are not counted: on a busy machine they are mostly waits for
	// a core, not spare capacity.
	idle atomic.Int64
}

// admit reports whether one more sample may be stored: while filling has taken no more
// than share of the workers' busy time plus the time the consumer kept them waiting.
func (m *fillMeter) admit(share float64) bool {
	return share >= 1 || float64(m.fill.Load()) <= share*float64(m.busy.Load())+float64(m.idle.Load())
}
