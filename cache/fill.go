package cache

import (
	"sync/atomic"
	"time"
)

// FillPolicy decides, for a loader that fills a cache while it trains, whether a freshly
// decoded sample is stored now or left for a later epoch. Storing costs the workers
// encode and write time, which training should not wait for, so while the loader is the
// bottleneck it may take only a share of the workers' busy time; the time they would
// otherwise idle, because the consumer is slower, is free. A sample not stored now is
// stored in a later epoch, when it is decoded again.
//
// A FillPolicy is safe for concurrent use.
type FillPolicy struct {
	share      float64
	busy, fill atomic.Int64 // nanoseconds summed over workers
	idle       atomic.Int64
}

// NewFillPolicy returns a policy that lets storing take share (0 to 1) of the workers'
// busy time plus their idle time; share 1 stores every sample at once.
func NewFillPolicy(share float64) *FillPolicy { return &FillPolicy{share: share} }

// Worked counts d of one worker's time spent on the epoch's own samples.
func (p *FillPolicy) Worked(d time.Duration) { p.busy.Add(int64(d)) }

// Idled counts d of worker time lost to waiting for the consumer. A worker's own waits
// should not be counted: on a busy machine they are mostly waits for a core, not spare
// capacity.
func (p *FillPolicy) Idled(d time.Duration) { p.idle.Add(int64(d)) }

// Filled counts d of one worker's time spent storing a sample.
func (p *FillPolicy) Filled(d time.Duration) { p.fill.Add(int64(d)) }

// Admit reports whether one more sample may be stored now: while storing has taken no
// more than the share of the busy time plus the idle time.
func (p *FillPolicy) Admit() bool {
	return p.share >= 1 || float64(p.fill.Load()) <= p.share*float64(p.busy.Load())+float64(p.idle.Load())
}
