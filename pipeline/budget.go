package pipeline

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// budget rations a number of bytes among holders and remembers the most ever held.
// It is safe for concurrent use.
type budget struct {
	sem        *semaphore.Weighted
	size       int64
	used, peak atomic.Int64
	total      *heldTotal // the loader-wide sum this budget adds into
}

// heldTotal is the sum of bytes held across the loader's budgets, and its peak.
type heldTotal struct {
	cur, peak atomic.Int64
}

func (t *heldTotal) add(n int64) {
	v := t.cur.Add(n)
	raise(&t.peak, v)
}

func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func newBudget(size int64, total *heldTotal) *budget {
	return &budget{sem: semaphore.NewWeighted(size), size: size, total: total}
}

// acquire blocks until n bytes are free or ctx is done. n must not exceed the size.
func (b *budget) acquire(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	raise(&b.peak, b.used.Add(n))
	b.total.add(n)
	return nil
}

func (b *budget) release(n int64) {
	b.used.Add(-n)
	b.total.add(-n)
	b.sem.Release(n)
}
