package pipeline

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/internal/seed"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
)

// ErrClosed is returned by a Loader that has been closed.
var ErrClosed = errors.New("pipeline: loader closed")

// ErrBusy is returned when an epoch is started while another is still being iterated.
var ErrBusy = errors.New("pipeline: another epoch is running")

// ErrHeld is returned when the caller holds every batch buffer without releasing any, so
// no further batch could ever be assembled.
var ErrHeld = errors.New("pipeline: every batch buffer is held by the caller; Release batches when done with them")

// maxAttempts bounds how many replacements a slot tries under Skip before the epoch fails.
const maxAttempts = 64

// Loader streams batches of a Source. Create it with New, iterate with Epoch, and Close it
// when done. Its methods are safe for concurrent use, but only one epoch runs at a time.
type Loader struct {
	cfg         Config
	src         Source
	packer      *pack.Packer
	pool        *pinned.Pool
	held        heldTotal
	read, dec   *budget // dec is shared by samples larger than a worker's retained share
	retain      int64   // decode memory each worker keeps between samples, charged once in New
	sampleBytes int
	nbuf        int // pinned batch buffers

	workers []*worker // per-worker reusable state, kept across epochs
	stats   counters

	region augment.RegionOp // the first augment op, decoded with the crop; nil: decode in full

	dev    *gpu.Device // where batches are delivered
	ownDev bool        // the loader opened dev and closes it
	ring   *gpu.Ring   // device buffers, one per batch delivered and not yet released
	slots  int         // the ring's slots: how many batches the consumer may hold

	spec string     // the decode spec, with the backend in use: part of every cache key
	conv *Converted // the source, when it is a converted dataset
	fill fillMeter

	mu      sync.Mutex
	run     *run // the epoch being iterated, or nil
	closed  bool
	sampler sampler
	order   []int32

	outstanding atomic.Int64 // batches handed out and not yet released
}

// New validates cfg and builds a Loader over src: it maps and locks the pinned batch
// buffers up front, so an impossible memory budget fails here, before training starts.
func New(src Source, cfg *Config) (*Loader, error) {
	if src == nil || src.Len() == 0 {
		return nil, errors.New("pipeline: empty source")
	}
	conv, _ := src.(*Converted)
	if conv != nil && cfg != nil && cfg.Cache != nil {
		return nil, errors.New("pipeline: a converted dataset is a cache already; leave Config.Cache unset")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	hostPack := c.Pack
	var devConv *gpu.Converter
	if c.DeviceConvert {
		var err error
		if devConv, err = gpu.NewConverter(c.Pack); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		hostPack = pack.Options{Width: c.Pack.Width, Height: c.Pack.Height, Layout: pack.NHWC, DType: pack.Uint8}
	}
	packer, err := pack.NewPacker(&hostPack)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	l := &Loader{cfg: c, src: src, conv: conv, packer: packer, sampleBytes: packer.SampleBytes(), nbuf: c.Prefetch + 1}
	if !c.FullDecode && c.Decode.Resize.Mode == decode.ResizeNone && len(c.Augment) > 0 {
		l.region, _ = c.Augment[0].(augment.RegionOp)
	}
	l.sampler = sampler{n: src.Len(), seed: c.Seed, shuffle: !c.Sequential, rank: c.Rank, world: c.World, dropUneven: c.DropUneven}
	if l.sampler.shardLen() == 0 {
		return nil, fmt.Errorf("pipeline: %d samples cannot be split among %d ranks", src.Len(), c.World)
	}
	if c.DropLast && l.sampler.shardLen() < c.BatchSize {
		return nil, fmt.Errorf("pipeline: DropLast with %d samples per epoch and BatchSize %d leaves no batch", l.sampler.shardLen(), c.BatchSize)
	}
	batchBytes := int64(c.BatchSize) * int64(l.sampleBytes)
	pinnedBytes := int64(l.nbuf) * pageRound(batchBytes)
	if c.MemoryBudget == 0 {
		l.cfg.MemoryBudget = pinnedBytes + max(640*mib, 64*mib+int64(c.Workers)*64*mib)
	}
	working := l.cfg.MemoryBudget - pinnedBytes
	if working < minWorkingBudget {
		return nil, fmt.Errorf("pipeline: MemoryBudget %d bytes leaves %d after %d batch buffers of %d bytes; need at least %d more",
			l.cfg.MemoryBudget, working, l.nbuf, batchBytes, minWorkingBudget-working)
	}
	// A fifth of the working memory rations reads. Of the rest, each worker keeps up to
	// half its share between samples (its decoder's and augmenter's scratch, charged here
	// once), and the other half is a pool that larger samples draw on one at a time.
	// A worker holds nothing from that pool while it waits for it, so it cannot deadlock.
	decTotal := working - working/5
	l.retain = decTotal / int64(2*c.Workers)
	l.read = newBudget(working/5, &l.held)
	l.dec = newBudget(decTotal-l.retain*int64(c.Workers), &l.held)
	l.held.add(l.retain * int64(c.Workers))
	if err := l.openDevice(devConv, batchBytes, pinnedBytes); err != nil {
		return nil, err
	}
	l.workers = make([]*worker, c.Workers)
	for i := range l.workers {
		l.workers[i] = &worker{}
		l.workers[i].reset(l)
	}
	l.spec = specOf(c.Decode, l.workers[0].dec.Backend())
	return l, nil
}

// openDevice opens the device, maps the pinned batch buffers (registered with the
// driver on a GPU) and allocates the device ring. On failure it undoes what it did.
func (l *Loader) openDevice(conv *gpu.Converter, batchBytes, pinnedBytes int64) (err error) {
	c := &l.cfg
	l.dev = c.GPU
	if l.dev == nil {
		if l.dev, err = gpu.Open(c.Device, c.Logf); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		l.ownDev = true
	}
	defer func() {
		if err != nil {
			l.closeDevice()
		}
	}()
	o := &pinned.Options{BufferSize: int(batchBytes), Budget: pinnedBytes}
	onGPU := l.dev.Kind() != gpu.Host
	if onGPU {
		// The driver page-locks the slabs when it registers them.
		lock := false
		o.Lock, o.Register, o.Unregister = &lock, l.dev.Register, l.dev.Unregister
	}
	if l.pool, err = pinned.New(o); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if n := l.pool.Stats().Buffers; n != l.nbuf {
		return fmt.Errorf("pipeline: pinned pool holds %d batch buffers, want %d", n, l.nbuf)
	}
	if st := l.pool.Stats(); !onGPU && !st.Locked {
		c.Logf("pipeline: batch buffers are not page-locked (%s); host-to-device copies may be slower", st.LockError)
	}
	// A GPU ring holds Prefetch batches: the one the consumer has and those copied ahead.
	// The host's zero-copy ring costs nothing, so it has one slot per pinned buffer.
	l.slots = c.Prefetch
	if !onGPU && conv == nil {
		l.slots = l.nbuf
	}
	if l.ring, err = l.dev.NewRing(gpu.RingOptions{Slots: l.slots, Bytes: int(batchBytes), Convert: conv}); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if onGPU {
		st := l.ring.Stats()
		c.Logf("pipeline: delivering batches to %v: %d device buffers of %d bytes, %d bytes in all", l.dev, st.Slots, st.SlotBytes, st.DeviceBytes)
	}
	return nil
}

// closeDevice frees the ring, the pinned buffers and the device, as far as they exist.
// Buffers and slots the caller still holds are freed when released.
func (l *Loader) closeDevice() error {
	var errs []error
	if l.ring != nil {
		errs = append(errs, l.ring.Close())
	}
	if l.pool != nil {
		l.pool.Close() // buffers still out are unmapped when released
	}
	if l.ownDev && l.dev != nil {
		errs = append(errs, l.dev.Close())
	}
	return errors.Join(errs...)
}

// pageRound rounds n up to a whole number of pages, as the pinned pool does.
func pageRound(n int64) int64 {
	page := int64(os.Getpagesize())
	return (n + page - 1) / page * page
}

// Config returns the effective configuration.
func (l *Loader) Config() Config { return l.cfg }

// Len is the number of batches per epoch.
func (l *Loader) Len() int {
	n := l.sampler.shardLen()
	if l.cfg.DropLast {
		return n / l.cfg.BatchSize
	}
	return (n + l.cfg.BatchSize - 1) / l.cfg.BatchSize
}

// SamplesPerEpoch is the number of samples this rank sees per epoch, before DropLast.
func (l *Loader) SamplesPerEpoch() int { return l.sampler.shardLen() }

// Epoch streams epoch e's batches in order. Breaking out of the loop stops the work; the
// iterator returns only after every goroutine it started has exited. An error is yielded
// at most once, as the last value. Batches stay valid until Release.
func (l *Loader) Epoch(ctx context.Context, e int) iter.Seq2[*Batch, error] {
	return l.EpochFrom(ctx, e, 0)
}

// EpochFrom resumes epoch e at cursor, the number of this epoch's samples already consumed
// (a multiple of BatchSize, as Batch.Cursor reports): the batches it yields are exactly
// those an uninterrupted Epoch would have yielded from there on.
func (l *Loader) EpochFrom(ctx context.Context, e, cursor int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		r, err := l.start(ctx, e, cursor)
		if err != nil {
			yield(nil, err)
			return
		}
		defer l.finish(r)
		bad := 0 // failed samples in the batches delivered so far
		for {
			t0 := time.Now()
			b, err := r.deliver()
			l.stats.wait.Add(int64(time.Since(t0)))
			if err != nil {
				yield(nil, err)
				return
			}
			if b == nil {
				return
			}
			// Errors travel with their batch and are reported in order, so what the
			// caller sees does not depend on how far ahead the workers were.
			bad += int(b.bad.Load())
			if err := b.failure(); err == nil && l.cfg.MaxBadFraction >= 0 && float64(bad) > l.cfg.MaxBadFraction*float64(len(r.order)) {
				b.setErr(-1, fmt.Errorf("pipeline: %d bad samples in epoch %d of %d samples exceed MaxBadFraction %g; last: %w",
					bad, r.epoch, len(r.order), l.cfg.MaxBadFraction, b.lastBad()))
			}
			if b.slot != nil {
				// A copy that already failed (a lost device) ends the epoch here, naming
				// the batch, rather than at the consumer's Wait.
				if _, err := b.slot.Ready(); err != nil {
					b.setErr(-1, b.deviceErr(err))
				}
			}
			if err := b.failure(); err != nil {
				r.putBack(b)
				yield(nil, err)
				return
			}
			l.outstanding.Add(1)
			l.stats.batches.Add(1)
			if !yield(b, nil) {
				return
			}
		}
	}
}

// deliver returns the next batch from the transfer stage, nil at the end of the epoch, or
// why the epoch stopped early.
func (r *run) deliver() (*Batch, error) {
	var b *Batch
	var ok bool
	select {
	case b, ok = <-r.out:
	default:
		if r.ctx.Err() != nil {
			return nil, r.stopped()
		}
		if r.l.outstanding.Load() >= int64(min(r.l.nbuf, r.l.slots)) {
			return nil, ErrHeld
		}
		select {
		case b, ok = <-r.out:
		case <-r.ctx.Done():
			return nil, r.stopped()
		}
	}
	if !ok {
		return nil, r.xferErr // written before out was closed
	}
	if r.ctx.Err() != nil {
		r.putBack(b)
		return nil, r.stopped()
	}
	return b, nil
}

// transfer takes complete batches in order, starts each one's copy into a free device
// buffer and passes it on; it runs ahead of the consumer by as many batches as the ring
// has free buffers, so batch k+1 is copied while the consumer works on batch k.
func (r *run) transfer() {
	defer r.wg.Done()
	defer close(r.out)
	l := r.l
	for {
		b, err := r.next()
		if err != nil || b == nil {
			r.xferErr = err
			return
		}
		if b.failure() == nil && l.cfg.StopAfter == AllStages {
			slot, ok := l.ring.TryAcquire()
			if !ok {
				t0 := time.Now()
				if slot, err = l.ring.Acquire(r.ctx); err != nil {
					r.putBack(b)
					r.xferErr = r.stopped()
					return
				}
				l.stats.slotWait.Add(int64(time.Since(t0)))
			}
			b.slot = slot
			if err := slot.Upload(b.Data); err != nil {
				b.setErr(-1, b.deviceErr(err))
			}
		}
		r.out <- b // never blocks: capacity is the number of buffers
	}
}

// next returns the next complete batch, nil at the end of the epoch, or why the epoch
// stopped early.
func (r *run) next() (*Batch, error) {
	var b *Batch
	var ok bool
	select {
	case b, ok = <-r.ready:
	case <-r.ctx.Done():
		return nil, r.stopped()
	}
	if !ok {
		return nil, r.cause()
	}
	select {
	case <-b.done:
	default:
		select {
		case <-b.done:
		case <-r.ctx.Done():
			r.park(b) // workers may still write into it: reclaim frees it after joining them
			return nil, r.stopped()
		}
	}
	if r.ctx.Err() != nil {
		r.putBack(b) // complete, so no worker touches it
		return nil, r.stopped()
	}
	return b, nil
}

// Close stops a running epoch, waits for its goroutines and unmaps the batch buffers. It
// reports batches still held by the caller; their memory stays valid until released.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	r := l.run
	l.mu.Unlock()
	if r != nil {
		r.cancel(ErrClosed)
		r.wg.Wait()
		r.reclaim()
	}
	for _, w := range l.workers {
		w.dec.Close()
		if w.coder != nil {
			w.coder.Close()
		}
	}
	err := l.closeDevice()
	if n := l.outstanding.Load(); n > 0 {
		return fmt.Errorf("pipeline: close: %d batches not released; their host and device memory stays allocated until they are", n)
	}
	if err != nil {
		return fmt.Errorf("pipeline: close: %w", err)
	}
	return nil
}

// run is one epoch in flight.
type run struct {
	l      *Loader
	epoch  int
	order  []int32
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	tasks   chan task
	retry   chan task // replacements; never blocks: capacity covers every slot in flight
	decodeQ chan readItem
	ready   chan *Batch   // batches in order, as they are dispatched
	out     chan *Batch   // complete batches, their copies started, for the consumer
	xferErr error         // why transfer stopped early; written before out is closed
	quit    chan struct{} // closed when every dispatched slot is written

	mu     sync.Mutex
	parked []*Batch // taken from ready but never delivered
}

type task struct {
	b       *Batch
	slot    int
	pos     int   // position in the epoch order
	idx     int   // source index to load
	attempt int32 // 0 for the original sample, then replacements
	noCache bool  // its cached record was damaged: decode the source
}

type readItem struct {
	task
	data []byte
	size int64 // bytes charged to the read budget
	err  error

	hit   bool      // data is the payload of ref
	ref   cache.Ref // the cached record, when hit
	store bool      // a miss to store under key once decoded
	key   cache.Key
}

// cause is why r stopped early, or nil when it was not stopped.
func (r *run) cause() error {
	err := context.Cause(r.ctx)
	if errors.Is(err, errEpochDone) {
		return nil
	}
	return err
}

// stopped is the error to yield once r's context is done.
func (r *run) stopped() error {
	if err := r.cause(); err != nil {
		return err
	}
	return ErrClosed
}

var errEpochDone = errors.New("pipeline: epoch done")

func (l *Loader) start(ctx context.Context, e, cursor int) (*run, error) {
	if e < 0 {
		return nil, fmt.Errorf("pipeline: negative epoch %d", e)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.run != nil {
		return nil, ErrBusy
	}
	l.order = l.sampler.order(e, l.order)
	n := len(l.order)
	if l.cfg.DropLast {
		n -= n % l.cfg.BatchSize
	}
	if cursor < 0 || cursor > n || (cursor%l.cfg.BatchSize != 0 && cursor != n) {
		return nil, fmt.Errorf("pipeline: cursor %d is not a batch boundary of an epoch of %d samples (batch %d)", cursor, n, l.cfg.BatchSize)
	}
	r := &run{
		l:       l,
		epoch:   e,
		order:   l.order[:n],
		tasks:   make(chan task, 2*l.cfg.Workers+l.cfg.IOWorkers),
		retry:   make(chan task, l.nbuf*l.cfg.BatchSize),
		decodeQ: make(chan readItem, 2*l.cfg.Workers),
		ready:   make(chan *Batch, l.nbuf),
		out:     make(chan *Batch, l.nbuf),
		quit:    make(chan struct{}),
	}
	if c := l.cfg.Cache; c != nil {
		// Pick up what other loaders sharing the directory stored since.
		if err := c.Refresh(); err != nil {
			l.cfg.Logf("pipeline: %v", err)
		}
	}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	l.run = r
	l.stats.epochs.Add(1)
	r.wg.Add(2 + l.cfg.IOWorkers + l.cfg.Workers)
	go r.dispatch(cursor)
	go r.transfer()
	for range l.cfg.IOWorkers {
		go r.reader()
	}
	for _, w := range l.workers {
		go r.work(w)
	}
	return r, nil
}

// finish stops r, joins its goroutines and returns what it still holds.
func (l *Loader) finish(r *run) {
	r.cancel(errEpochDone)
	r.wg.Wait()
	r.reclaim()
	l.mu.Lock()
	l.run = nil
	l.mu.Unlock()
}

// reclaim returns the buffers of batches never handed out and the read budget of files
// never decoded. It runs once r's goroutines have exited; the iterator and Close may both
// call it.
func (r *run) reclaim() {
	for b := range r.out {
		r.putBack(b)
	}
	for b := range r.ready {
		r.putBack(b)
	}
	for {
		select {
		case it := <-r.decodeQ:
			r.l.read.release(it.size)
			continue
		default:
		}
		break
	}
	r.mu.Lock()
	parked := r.parked
	r.parked = nil
	r.mu.Unlock()
	for _, b := range parked {
		r.putBack(b)
	}
}

func (r *run) park(b *Batch) {
	r.mu.Lock()
	r.parked = append(r.parked, b)
	r.mu.Unlock()
}

// putBack returns the buffer of a batch the consumer never saw.
func (r *run) putBack(b *Batch) {
	b.ld = nil
	b.Release()
}

// dispatch walks the epoch order batch by batch: it takes a buffer (waiting while all are
// in use: this is what bounds memory), queues the batch for in-order delivery, then hands
// its slots to the readers.
func (r *run) dispatch(cursor int) {
	defer r.wg.Done()
	defer close(r.ready)
	l := r.l
	bs := l.cfg.BatchSize
	var inflight []*Batch
	for start := cursor; start < len(r.order); start += bs {
		buf, ok := l.pool.TryGet()
		if !ok {
			// Every buffer is full or in the consumer's hands: the consumer is the slower
			// side, and the workers will idle for about as long as this wait.
			t0 := time.Now()
			var err error
			if buf, err = l.pool.Get(r.ctx); err != nil {
				r.cancel(err)
				return
			}
			l.fill.idle.Add(int64(time.Since(t0)) * int64(l.cfg.Workers))
		}
		n := min(bs, len(r.order)-start)
		b := &Batch{
			Epoch: r.epoch, Number: start / bs, Cursor: start + n, Len: n,
			Data: buf.Bytes()[:n*l.sampleBytes], Layout: l.cfg.Pack.Layout, DType: l.cfg.Pack.DType,
			Labels: make([]int32, n), Indices: make([]int64, n),
			buf: buf, ld: l, done: make(chan struct{}), hostU8: l.cfg.DeviceConvert,
		}
		b.Shape = l.shape(n)
		b.remaining.Store(int32(n))
		r.ready <- b // never blocks: capacity is the number of buffers
		for s := range n {
			t := task{b: b, slot: s, pos: start + s, idx: int(r.order[start+s])}
			select {
			case r.tasks <- t:
			case <-r.ctx.Done():
				return
			}
		}
		// A buffer is reused only after its batch was delivered, so at most nbuf batches
		// can be incomplete: keep just those.
		if len(inflight) == l.nbuf {
			inflight = inflight[1:]
		}
		inflight = append(inflight, b)
	}
	close(r.tasks)
	for _, b := range inflight {
		select {
		case <-b.done:
		case <-r.ctx.Done():
			return
		}
	}
	close(r.quit)
}

func (l *Loader) shape(n int) [4]int {
	w, h := l.cfg.Pack.Width, l.cfg.Pack.Height
	if l.cfg.Pack.Layout == pack.NHWC {
		return [4]int{n, h, w, 3}
	}
	return [4]int{n, 3, h, w}
}

// reader loads encoded bytes for the workers, replacements first.
func (r *run) reader() {
	defer r.wg.Done()
	tasks := r.tasks
	for {
		var t task
		var ok bool
		select {
		case t = <-r.retry:
		default:
			select {
			case t = <-r.retry:
			case t, ok = <-tasks:
				if !ok {
					tasks = nil
					continue
				}
			case <-r.quit:
				return
			case <-r.ctx.Done():
				return
			}
		}
		it := r.load(t)
		select {
		case r.decodeQ <- it:
		case <-r.ctx.Done():
			r.l.read.release(it.size)
			return
		}
	}
}

// load reads sample t.idx whole, from the cache when it holds it, charging its size to
// the read budget.
func (r *run) load(t task) readItem {
	l := r.l
	it := readItem{task: t}
	t0 := time.Now()
	if l.conv != nil {
		ref := l.conv.refs[t.idx]
		if it.err = r.reserve(&it, int64(ref.Bytes)); it.err != nil {
			return it
		}
		it.data, it.err = l.conv.cache.Read(ref, nil) // mapped: no copy
		it.hit, it.ref = true, ref
		l.stats.read.add(t0, int64(ref.Bytes))
		return it
	}
	f, fi, err := openSample(l.src, t.idx)
	if err != nil {
		it.err = err
		return it
	}
	defer f.Close()
	size := fi.Size()
	if c := l.cfg.Cache; c != nil && !t.noCache {
		key := sampleKey(l.spec, l.src, t.idx, fi)
		if ref, ok := c.Lookup(key); ok {
			if it.err = r.reserve(&it, int64(ref.Bytes)); it.err != nil {
				return it
			}
			payload, err := c.Read(ref, make([]byte, ref.Bytes))
			if err == nil {
				it.data, it.hit, it.ref = payload, true, ref
				l.stats.read.add(t0, int64(ref.Bytes))
				l.stats.cacheHits.Add(1)
				return it
			}
			// Damaged (the cache counted it and forgot the record): decode the source.
			l.cfg.Logf("pipeline: %v; decoding the source instead", err)
			l.read.release(it.size)
			it.size = 0
		}
		it.store, it.key = true, key
	}
	if it.err = r.reserve(&it, size+1); it.err != nil {
		return it
	}
	data, err := readWhole(f, size, make([]byte, size+1))
	if it.err = err; err == nil {
		it.data = data
	}
	l.stats.read.add(t0, int64(len(data)))
	return it
}

// reserve charges n bytes to the read budget for it.
func (r *run) reserve(it *readItem, n int64) error {
	if n > r.l.read.size {
		return fmt.Errorf("%w: %d bytes to read exceed the read budget of %d bytes", decode.ErrTooLarge, n, r.l.read.size)
	}
	if err := r.l.read.acquire(r.ctx, n); err != nil {
		return err
	}
	it.size = n
	return nil
}

// work decodes, augments and packs samples into their slots.
func (r *run) work(w *worker) {
	defer r.wg.Done()
	for {
		select {
		case it := <-r.decodeQ:
			r.process(w, it)
		case <-r.quit:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

func (r *run) process(w *worker, it readItem) {
	l := r.l
	err := it.err
	if err == nil && l.cfg.StopAfter != ReadStage {
		err = w.sample(r, it)
	}
	l.read.release(it.size)
	if err != nil {
		var fatal *fatalError
		switch {
		case errors.As(err, &fatal):
			it.b.setErr(it.slot, fatal.err)
		case r.ctx.Err() != nil:
			return // stopping: the slot will never be delivered
		case it.hit && l.conv == nil && errors.Is(err, cache.ErrCorrupt):
			// The record did not decode (the cache counted it and forgot it): load the
			// same sample from its source, with the same random stream.
			l.cfg.Logf("pipeline: %v; decoding the source instead", err)
			it.noCache = true
			r.retry <- it.task // never blocks: one entry per slot in flight at most
			return
		case r.fail(it.task, err):
			return // a replacement fills the slot
		}
	} else {
		it.b.Labels[it.slot] = int32(l.src.Label(it.idx))
		it.b.Indices[it.slot] = int64(it.idx)
	}
	if it.b.remaining.Add(-1) == 0 {
		it.b.completed.Store(time.Now().UnixNano())
		close(it.b.done)
	}
}

// fail records a bad sample and applies the policy. It reports whether a replacement
// was queued; otherwise the slot is finished with an error on its batch.
func (r *run) fail(t task, err error) bool {
	l := r.l
	bad := &SampleError{Path: l.src.Path(t.idx), Index: t.idx, Epoch: r.epoch, Err: err}
	l.stats.addBad(bad)
	l.cfg.Logf("%v", bad)
	t.b.noteBad(t.slot, bad)
	if l.cfg.OnError == Fail {
		t.b.setErr(t.slot, bad)
		return false
	}
	if t.attempt+1 >= maxAttempts {
		t.b.setErr(t.slot, fmt.Errorf("pipeline: no good replacement for position %d of epoch %d after %d attempts; last: %w",
			t.pos, r.epoch, maxAttempts, bad))
		return false
	}
	// The replacement depends only on (seed, epoch, position, attempt), so it is the same
	// whatever the worker count, and a resumed epoch makes the same choice.
	t.attempt++
	t.idx = int(seed.Mix(seed.Mix(l.cfg.Seed, uint64(r.epoch)), uint64(t.pos)<<8|uint64(t.attempt)) % uint64(l.src.Len()))
	r.retry <- t // never blocks: one entry per slot in flight at most
	return true
}

// SampleError is a sample that could not be loaded, with the file that caused it.
type SampleError struct {
	Path  string
	Index int
	Epoch int
	Err   error
}

func (e *SampleError) Error() string {
	return fmt.Sprintf("pipeline: bad sample %q (index %d, epoch %d): %v", e.Path, e.Index, e.Epoch, e.Err)
}

func (e *SampleError) Unwrap() error { return e.Err }

// fatalError wraps errors that are not the sample's fault (configuration, packing) and
// end the epoch whatever the policy.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// worker is one CPU worker's reusable state.
type worker struct {
	dec   *decode.Decoder
	coder *cache.Coder // nil without a cache
	actx  *augment.Context
	img   decode.Image
}

func (w *worker) reset(l *Loader) {
	if w.dec != nil {
		w.dec.Close()
	}
	if w.coder != nil {
		w.coder.Close()
		w.coder = nil
	}
	// Options were validated in New, so NewDecoder cannot fail here.
	w.dec, _ = decode.NewDecoder(&l.cfg.Decode)
	switch {
	case l.conv != nil:
		w.coder = l.conv.cache.NewCoder()
	case l.cfg.Cache != nil:
		w.coder = l.cfg.Cache.NewCoder()
	}
	w.actx = augment.NewContext()
	w.img = decode.Image{}
}

// decodeBytes estimates the memory a sample of w×h pixels may hold at once: the decoder's
// own planes (up to 4 bytes a pixel for CMYK), the RGB image, an orientation or resize
// copy, and the augmentation's two buffers, allowing them four times the packed size for
// intermediate steps such as eval's Resize before its CenterCrop.
func (l *Loader) decodeBytes(cfg decode.Config) int64 {
	return 10*int64(cfg.Width)*int64(cfg.Height) + 24*int64(l.cfg.Pack.Width)*int64(l.cfg.Pack.Height)
}

func (w *worker) sample(r *run, it readItem) error {
	l := r.l
	var cfg decode.Config
	if it.hit {
		cfg = decode.Config{Width: int(it.ref.Width), Height: int(it.ref.Height)}
	} else {
		var err error
		if cfg, err = w.dec.Config(it.data); err != nil {
			return err
		}
	}
	if need := l.decodeBytes(cfg); need > l.retain {
		// Too big for the memory this worker keeps: borrow from the shared pool, holding
		// nothing else from it, and drop the grown scratch afterwards.
		if need > l.dec.size {
			return fmt.Errorf("%w: %dx%d needs about %d bytes of decode memory, more than the %d bytes Config.MemoryBudget leaves for one image; raise it", decode.ErrTooLarge, cfg.Width, cfg.Height, need, l.dec.size)
		}
		if err := l.dec.acquire(r.ctx, need); err != nil {
			return err
		}
		defer func() {
			w.reset(l)
			l.dec.release(need)
		}()
	}
	t0 := time.Now()
	w.actx.Seed(l.cfg.Seed, uint64(r.epoch), int64(it.idx)+int64(it.attempt)<<40)
	ops := l.cfg.Augment
	var img *decode.Image
	var err error
	switch {
	case it.hit:
		img, err = w.coder.Decode(&w.img, it.ref, it.data)
	case l.region != nil && !it.store:
		// Crop-aware decode: draw the crop from the header's size, decode only it.
		rect, ow, oh, rerr := l.region.Region(w.actx, cfg.Width, cfg.Height)
		if rerr != nil {
			return &fatalError{fmt.Errorf("pipeline: %s: %w", l.src.Path(it.idx), rerr)}
		}
		img, err = w.dec.DecodeRegion(&w.img, it.data, rect, ow, oh)
		ops = ops[1:]
	default:
		img, err = w.dec.Decode(&w.img, it.data)
	}
	if err != nil {
		return err
	}
	t1 := l.stats.decode.add(t0, int64(img.Width*img.Height))
	if it.store {
		t1 = w.store(l, it, img, t1)
	}
	if l.cfg.StopAfter == DecodeStage {
		l.fill.busy.Add(int64(t1.Sub(t0)))
		return nil
	}
	out, err := ops.Apply(w.actx, img)
	if err != nil {
		return err
	}
	t2 := l.stats.augment.add(t1, 1)
	if l.cfg.StopAfter == AugmentStage {
		l.fill.busy.Add(int64(t2.Sub(t0)))
		return nil
	}
	slot := it.b.Data[it.slot*l.sampleBytes : (it.slot+1)*l.sampleBytes]
	if err := l.packer.Pack(slot, out); err != nil {
		return &fatalError{fmt.Errorf("pipeline: %s: %w (the augment pipeline must produce the packed size)", l.src.Path(it.idx), err)}
	}
	t3 := l.stats.pack.add(t2, int64(l.sampleBytes))
	l.fill.busy.Add(int64(t3.Sub(t0)))
	return nil
}

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
