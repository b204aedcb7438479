package pipeline

import (
	"bytes"
	"context"
	"image"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/cmem"
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
		// The record's rows (all of them at most) and the resampler's intermediate.
		need = 10 * int64(cfg.Width) * int64(cfg.Height)
		if d.region {
			return need, d.w, d.h, nil
		}
		return need, cfg.Width, cfg.Height, nil
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
	// retain is a worker's share, half the total over the active workers; workers is
	// that count. Both change when the tuner changes the count (setWorkers); a worker
	// holding a share of another size gives it back before its next sample.
	retain, workers atomic.Int64

	mu    sync.Mutex
	large int           // samples waiting for more than the retained shares leave
	drain chan struct{} // closed while large > 0
}

func newDecodeMemory(size int64, workers int, total *heldTotal) *decodeMemory {
	m := &decodeMemory{budget: newBudget(size, total), drain: make(chan struct{})}
	m.setWorkers(workers)
	return m
}

// setWorkers shares the retained half out among n active workers.
func (m *decodeMemory) setWorkers(n int) {
	m.retain.Store(m.size / int64(2*n))
	m.workers.Store(int64(n))
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
	// Workers that kept a larger share from before a change give it back at their
	// next sample; until then this may wait for them.
	if n <= m.size-m.workers.Load()*m.retain.Load() {
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

// returner gives what the loader lets go of back to the system when the process's
// anonymous memory nears what it had when the loader was made plus MemoryBudget
// (conveyor bench reports both). Decoding allocates: the encoded file's bytes, scratch
// that grows to a larger image, and for a sample larger than a worker's retained share
// (a photo) scratch for it alone, dropped after; the native decoders malloc and free
// their working memory in C. None of it goes back by itself: Go collects garbage once
// its heap has doubled since the last collection (GOGC=100) and keeps the freed pages
// until its scavenger slowly returns those beyond its next goal, and glibc keeps freed
// memory in per-thread heaps, which grow as large images land on other threads: with
// photos, the process reached 1.5 times MemoryBudget and kept growing over epochs.
//
// So glibc keeps at most cHeaps heaps (cmem.LimitArenas), where freed decoder memory is
// reused whichever thread decodes next, and the workers look, at most every checkEvery,
// at the resident anonymous memory (/proc/self/statm). From limit-margin on (a fifth of
// MemoryBudget below the limit), at most every minGap, one goroutine collects garbage
// and trims the C heaps (cmem.Trim), and when that is not enough returns the Go heap's
// free pages (debug.FreeOSMemory). The first time even that leaves the process within
// the margin, glibc is told to map large blocks by themselves, unmapped when freed
// (cmem.MapLarge: its heaps keep freed decoder memory in pieces among blocks in use,
// which Trim cannot return; mapping costs page faults, so only a tight budget pays
// it). A return that ends past the limit means the rest is not the loader's (the
// program's own memory grew, or garbage outpaces the returns): the next waits, twice
// as long after each such return, up to maxBackoff. Memory given back costs page
// faults when it is used again, so it is given back only under pressure: with small
// images the process stays far below the limit and this never runs. Where statm cannot
// be read (not Linux) it never runs either.
type returner struct {
	limit   atomic.Int64 // 0: not measured; raised as the pinned pool grows
	margin  int64
	running atomic.Bool
	runs    atomic.Int64
	wg      sync.WaitGroup
	next    atomic.Int64 // UnixNano before which check does not look

	// Garbage the loader dropped since the last collection; see dropped.
	garbage, garbageCycle atomic.Int64
	garbageLimit          int64
	collecting            atomic.Bool
	collections           atomic.Int64

	// The returning goroutine's, read by check once it has finished (running false).
	mapped  bool          // glibc maps large blocks by themselves
	backoff time.Duration // wait before the next return; 0 after one that ended under the limit
	now     func() time.Time
}

// returnShare sets the margin, a returnShare-th of MemoryBudget; checkEvery is how
// often the workers look; minGap the least time from one return to the next; returns
// that end past the limit back off from minBackoff to maxBackoff.
const (
	returnShare = 5
	checkEvery  = 5 * time.Millisecond
	minGap      = 25 * time.Millisecond
	minBackoff  = 50 * time.Millisecond
	maxBackoff  = 5 * time.Second
)

// cHeaps is how many heaps glibc may keep for the native decoders' memory (see
// cmem.LimitArenas), set by the first New.
const cHeaps = 2

var limitHeaps sync.Once

// mapLarge is the size from which glibc maps C blocks by themselves, once a return that
// gave back all it could left the process within a margin of its limit.
const mapLarge = 1 << 20

// newReturner makes the loader's returner: the limit is the anonymous memory now plus
// budget.
func newReturner(budget int64) *returner {
	limitHeaps.Do(func() { cmem.LimitArenas(cHeaps) })
	watchGC()
	r := &returner{margin: budget / returnShare, garbageLimit: budget / garbageShare, now: time.Now}
	if anon, ok := anonResident(); ok {
		r.limit.Store(anon + budget)
	}
	return r
}

// raise raises the limit by n bytes: batch buffers the tuner mapped, which the budget
// held back from the limit until then.
func (r *returner) raise(n int64) {
	if r.limit.Load() != 0 {
		r.limit.Add(n)
	}
}

// check looks, at most every checkEvery, at the process's anonymous memory, and starts a
// return when it has reached limit-margin (unless one ran within minGap, or returns are
// backing off).
func (r *returner) check(now time.Time) {
	t, next := now.UnixNano(), r.next.Load()
	limit := r.limit.Load()
	if limit == 0 || t < next || r.running.Load() || !r.next.CompareAndSwap(next, t+int64(checkEvery)) {
		return // one worker looks; the others go on
	}
	anon, ok := anonResident()
	if !ok || anon < limit-r.margin || !r.running.CompareAndSwap(false, true) {
		return
	}
	r.next.Store(t + int64(minGap))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.running.Store(false)
		r.giveBack()
		r.runs.Add(1)
	}()
}

// giveBack returns memory: see returner. It runs in one goroutine at a time.
func (r *returner) giveBack() {
	// A collection first: the pages it frees stay resident and are reused without
	// faults. Only when that is not enough do the heap's free pages go back.
	runtime.GC()
	cmem.Trim()
	limit := r.limit.Load()
	if anon, ok := anonResident(); !ok || anon < limit-r.margin {
		r.backoff = 0
		return
	}
	debug.FreeOSMemory()
	anon, ok := anonResident()
	if ok && anon >= limit-r.margin && !r.mapped {
		r.mapped = cmem.MapLarge(mapLarge)
	}
	if !ok || anon <= limit {
		r.backoff = 0
		return
	}
	r.backoff = min(max(2*r.backoff, minBackoff), maxBackoff)
	r.next.Store(r.now().Add(r.backoff).UnixNano())
}

// wait waits for a return in progress.
func (r *returner) wait() { r.wg.Wait() }

// dropped records n bytes of Go memory the loader has let go of and the Go heap holds
// until its next collection: a file's bytes once decoded, a worker's scratch dropped
// after a sample larger than its retained share. Go collects when its heap has doubled
// since the last collection, so with photos that garbage, not what the loader holds,
// decided the process's size under a tight MemoryBudget (400M: the anonymous peak at
// 119% while the loader held at most 74%). When what was dropped since the last
// collection reaches garbageShare-th of the budget, the worker that dropped the last of
// it collects (one at a time), so the heap stays near what the loader holds plus that
// share; a collection the runtime made by itself clears the count too (gcCycles, two
// cycles after it was cleared: one may have begun before the bytes were dropped).
func (r *returner) dropped(n int64) {
	if n <= 0 || r.garbageLimit <= 0 {
		return
	}
	if c := gcCycles.Load(); c >= r.garbageCycle.Load()+2 {
		r.garbage.Store(0)
		r.garbageCycle.Store(c)
	}
	if r.garbage.Add(n) < r.garbageLimit || !r.collecting.CompareAndSwap(false, true) {
		return
	}
	runtime.GC()
	r.garbage.Store(0)
	r.garbageCycle.Store(gcCycles.Load())
	r.collections.Add(1)
	r.collecting.Store(false)
}

// garbageShare sets the garbage a worker collects at: a garbageShare-th of MemoryBudget.
const garbageShare = 10

// gcCycles counts the runtime's garbage collections, approximately (a cleanup on an
// object dropped at once, re-armed each time it runs), from the first loader on.
var (
	gcCycles  atomic.Int64
	watchOnce sync.Once
)

func watchGC() { watchOnce.Do(armGCWatch) }

func armGCWatch() {
	runtime.AddCleanup(new([32]byte), func(struct{}) {
		gcCycles.Add(1)
		armGCWatch()
	}, struct{}{})
}

// anonResident is the process's resident anonymous memory in bytes: /proc/self/statm's
// resident pages less its shared (file-backed and shared-memory) ones.
func anonResident() (int64, bool) {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var buf [128]byte
	n, _ := f.Read(buf[:])
	fields := bytes.Fields(buf[:n])
	if len(fields) < 3 {
		return 0, false
	}
	resident, err1 := strconv.ParseInt(string(fields[1]), 10, 64)
	shared, err2 := strconv.ParseInt(string(fields[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (resident - shared) * int64(os.Getpagesize()), true
}
