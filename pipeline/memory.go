package pipeline

import (
	"context"
	"image"
	"os"
	"sync"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/augment"
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

// decodePlan is how a sample will be decoded: whole, or (region) the crop rect resized
// to w×h.
type decodePlan struct {
	region bool
	rect   image.Rectangle
	w, h   int
}

// decodeNeed is what decoding sample it, with header cfg, as planned holds at once
// (decode.Decoder.Footprint: after DCT scaling and resize-first, or for the crop alone; a
// stored record, 10 bytes a pixel), and the size of the image the augment ops start from.
func (l *Loader) decodeNeed(dec *decode.Decoder, it readItem, cfg decode.Config, d decodePlan) (need int64, w, h int, err error) {
	switch {
	case it.hit:
		return 10 * int64(cfg.Width) * int64(cfg.Height), cfg.Width, cfg.Height, nil
	case d.region:
		need, err = dec.Footprint(it.data, d.rect, d.w, d.h)
		return need, d.w, d.h, err
	}
	need, err = dec.Footprint(it.data, image.Rectangle{}, 0, 0)
	w, h = l.cfg.Decode.Resize.OutputSize(cfg.Width, cfg.Height)
	return need, w, h, err
}

// opsNeed is what the augment ops chain (after the crop, for a region decode) holds for a
// width×height input: their Context's two buffers, each at most the largest image an op
// makes (3 bytes a pixel). That image is worked out, or bounded, when every op is an
// augment.Sizer or augment.MaxSizer (see Pipeline.Largest), so an eval Resize that would
// enlarge a 1×100000 image is refused before it allocates and a random expanding rotation
// reserves for its largest angle; otherwise four times the packed size is assumed. w×h is the largest image (0×0 when
// unknown), for messages.
func (l *Loader) opsNeed(chain augment.Pipeline, width, height int) (need int64, w, h int) {
	if w, h, ok := chain.Largest(width, height); ok {
		return 6 * int64(w) * int64(h), w, h
	}
	return 24 * int64(l.cfg.Pack.Width) * int64(l.cfg.Pack.Height), 0, 0
}

// decodeMemory rations the workers' decode working memory: decoders' planes, the RGB
// image, resize and orientation copies and the augmentation's buffers. Each worker keeps
// up to retain bytes reserved between samples for the scratch it reuses (half its share:
// half the total over the workers). A larger sample reserves what it needs on its own;
// when that does not fit beside every worker's retained share, the workers give their
// shares back (draining) until it has reserved its memory, so an image that fits the
// whole decode memory waits for it instead of failing. semaphore.Weighted serves waiters in order, so a large
// sample is not overtaken by workers reserving their shares again.
type decodeMemory struct {
	*budget
	retain, workers int64

	mu    sync.Mutex
	large int           // samples waiting for more than the retained shares leave
	drain chan struct{} // closed while large > 0
}

func newDecodeMemory(size int64, workers int, total *heldTotal) *decodeMemory {
	return &decodeMemory{budget: newBudget(size, total), retain: size / int64(2*workers), workers: int64(workers), drain: make(chan struct{})}
}

// draining returns a channel that is closed while a large sample waits for the workers'
// retained shares.
func (m *decodeMemory) draining() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.drain
}

// acquireLarge reserves n bytes for one sample and returns the function that gives them
// back.
func (m *decodeMemory) acquireLarge(ctx context.Context, n int64) (release func(), err error) {
	if n <= m.size-m.workers*m.retain {
		if err := m.acquire(ctx, n); err != nil {
			return nil, err
		}
		return func() { m.release(n) }, nil
	}
	m.mu.Lock()
	if m.large++; m.large == 1 {
		close(m.drain)
	}
	m.mu.Unlock()
	done := func() {
		m.mu.Lock()
		if m.large--; m.large == 0 {
			m.drain = make(chan struct{})
		}
		m.mu.Unlock()
	}
	err = m.acquire(ctx, n)
	// The workers need only give their shares back until the sample has its memory;
	// those that reserve them again meanwhile wait for what is left.
	done()
	if err != nil {
		return nil, err
	}
	return func() { m.release(n) }, nil
}
