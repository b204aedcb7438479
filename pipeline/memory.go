package pipeline

import (
	"context"
	"os"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/decode"
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

// pageRound rounds n up to a whole number of pages, as the pinned pool does.
func pageRound(n int64) int64 {
	page := int64(os.Getpagesize())
	return (n + page - 1) / page * page
}

// decodeBytes estimates the memory a sample of w×h pixels may hold at once: the decoder's
// own planes (up to 4 bytes a pixel for CMYK), the RGB image, an orientation or resize
// copy, and the augmentation's two buffers, allowing them four times the packed size for
// intermediate steps such as eval's Resize before its CenterCrop.
func (l *Loader) decodeBytes(cfg decode.Config) int64 {
	return 10*int64(cfg.Width)*int64(cfg.Height) + 24*int64(l.cfg.Pack.Width)*int64(l.cfg.Pack.Height)
}
