package pipeline

import (
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/mixup"
)

// work decodes, augments and packs samples into their slots.
func (r *run) work(w *worker, i int) {
	defer r.wg.Done()
	l := r.l
	t := l.tune
	for {
		if wake := t.parked(i, &t.workers); wake != nil {
			// Beyond the tuner's count: hold no decode memory while parked.
			w.unreserve(l)
			if !r.waitWake(wake) {
				return
			}
			continue
		}
		// A sample too large to decode beside every worker's scratch is waiting for the
		// whole decode memory: give this worker's back first, busy or idle.
		var drain <-chan struct{}
		if w.held > 0 {
			drain = l.dec.draining()
			select {
			case <-drain:
				w.unreserve(l)
				continue
			default:
			}
		}
		select {
		case it := <-r.decodeQ:
			r.process(w, it)
			continue
		default:
		}
		t0 := time.Now()
		select {
		case it := <-r.decodeQ:
			t.starved.Add(int64(time.Since(t0)))
			r.process(w, it)
		case <-drain:
			w.unreserve(l)
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
	switch {
	case err != nil:
	case l.conv != nil && it.hit && !it.pixels:
		l.conv.skipped.Add(1) // stored before, unchanged and intact: nothing to convert
	case l.cfg.StopAfter != ReadStage:
		err = w.guarded(r, it)
	}
	if !it.hit && it.buf == nil {
		l.returns.dropped(int64(cap(it.data))) // a file's bytes, read into a buffer of its own
	}
	putReadBuf(&it) // decoded: the record's bytes are no longer used
	l.read.release(it.size)
	if err != nil {
		var fatal *fatalError
		switch {
		case errors.As(err, &fatal):
			it.b.setErr(it.slot, fatal.err)
		case r.ctx.Err() != nil:
			return // stopping: the slot will never be delivered
		case it.hit && !it.pixels && errors.Is(err, cache.ErrCorrupt):
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
		if it.b.Targets != nil {
			if err := w.fillTarget(r, it.b, it.slot, it.idx); err != nil {
				it.b.setErr(it.slot, err)
			}
		}
	}
	if it.b.remaining.Add(-1) == 0 {
		w.mixBatch(r, it.b) // the last slot is written: the batch is this worker's alone
		it.b.completed.Store(time.Now().UnixNano())
		close(it.b.done)
	}
}

// worker is one CPU worker's reusable state.
type worker struct {
	dec    *decode.Decoder
	coders map[*cache.Cache]*cache.Coder // one per cache the worker stored into or read from
	actx   *augment.Context
	img    decode.Image
	held   int64 // decode memory reserved for the scratch above, kept between samples

	labels []int      // a sample's labels, for its target row
	pcg    rand.PCG   // the batch mixing draw's generator, reseeded per batch
	rng    *rand.Rand // over pcg
	mixer  mixup.Mixer
}

// guarded runs sample, turning a panic into an error that carries the stack. The steps
// that run the augment ops' code or the packer catch their own (recoverOp): an error
// that ends the epoch, as any op error after New does. Any other panic is the decoder's
// (hostile bytes found a decoder bug), or the sample cache's: a bad sample, named and
// skipped when skipping. The worker's state is rebuilt, since the panic may have left it
// half-written.
func (w *worker) guarded(r *run, it readItem) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("decoding: %w", w.caught(r.l, v))
		}
	}()
	return w.sample(r, it)
}

// recoverOp, deferred by the steps that run the augment ops' code or the packer, turns
// a panic there into the error of a failing op (run.opFailure), which ends the epoch.
func (w *worker) recoverOp(r *run, t task, err *error) {
	if v := recover(); v != nil {
		*err = r.opFailure(t, w.caught(r.l, v))
	}
}

// caught is a recovered panic v with the stack; it rebuilds the worker's state, which the
// panic may have left half-written.
func (w *worker) caught(l *Loader, v any) *PanicError {
	p := &PanicError{Value: v, Stack: debug.Stack()}
	w.reset(l)
	return p
}

// unreserve drops the worker's scratch and gives back the decode memory it held for it.
func (w *worker) unreserve(l *Loader) {
	if w.held > 0 {
		w.reset(l)
		l.dec.release(w.held)
		l.returns.dropped(w.held)
		w.held = 0
	}
}

// coder returns the worker's coder for c.
func (w *worker) coder(c *cache.Cache) *cache.Coder {
	cd, ok := w.coders[c]
	if !ok {
		if w.coders == nil {
			w.coders = map[*cache.Cache]*cache.Coder{}
		}
		cd = c.NewCoder()
		w.coders[c] = cd
	}
	return cd
}

// close releases the worker's decoder and coders.
func (w *worker) close() {
	if w.dec != nil {
		w.dec.Close()
	}
	for _, cd := range w.coders {
		cd.Close()
	}
	w.coders = nil
}

func (w *worker) reset(l *Loader) {
	w.close()
	// Options were validated in New, so NewDecoder cannot fail here.
	w.dec, _ = decode.NewDecoder(&l.cfg.Decode)
	// A reset may come between drawing a sample's crop and its other draws (when it
	// gives back a retained share): the random stream goes on where it was.
	if w.actx != nil {
		w.actx = w.actx.Fresh()
	} else {
		w.actx = augment.NewContext()
	}
	w.actx.Resizer.Exact = l.cfg.Fidelity == Exact
	w.img = decode.Image{}
}

// sample decodes, augments and packs sample it into its slot, as steps: its size, the
// crop it decodes, the memory the rest needs, decoding, storing it in the sample cache,
// the ops and packing. Config.StopAfter ends it early.
func (w *worker) sample(r *run, it readItem) error {
	l := r.l
	cfg, err := w.header(&it)
	if err != nil {
		return err
	}
	// The random stream starts here, so drawing the crop before reserving memory for it
	// takes the same numbers as drawing it when decoding would.
	w.actx.Seed(l.cfg.Order.Seed, uint64(r.epoch), int64(it.idx)+int64(it.attempt)<<40)
	d, err := w.planCrop(r, &it, cfg)
	if err != nil {
		return err
	}
	release, err := w.reserve(r, &it, cfg, d)
	if err != nil {
		return err
	}
	if release != nil {
		defer release()
	}
	t0 := time.Now()
	img, ops, err := w.decode(l, &it, d)
	if err != nil {
		return err
	}
	t1 := l.stats.decode.add(t0, int64(img.Width*img.Height))
	if it.store {
		if t1, err = w.store(l, it, img, t1); err != nil {
			return err
		}
	}
	if l.cfg.StopAfter == DecodeStage {
		l.fill.Worked(t1.Sub(t0))
		return nil
	}
	out, err := w.applyOps(r, &it, ops, img)
	if err != nil {
		return err
	}
	t2 := l.stats.augment.add(t1, 1)
	if l.cfg.StopAfter == AugmentStage {
		l.fill.Worked(t2.Sub(t0))
		return nil
	}
	if err := w.pack(r, &it, ops, out); err != nil {
		return err
	}
	t3 := l.stats.pack.add(t2, int64(l.sampleBytes))
	l.fill.Worked(t3.Sub(t0))
	l.returns.check(t3)
	return nil
}

// header is sample it's size: its record's, or its file header's.
func (w *worker) header(it *readItem) (decode.Config, error) {
	if it.hit {
		return decode.Config{Width: int(it.ref.Width), Height: int(it.ref.Height)}, nil
	}
	return w.dec.Config(it.data)
}

// planCrop plans a crop-aware decode: when the first op is a region op and the sample is
// not to be stored, it draws the crop from the header's (or record's) size, and only the
// crop is decoded. The draw is the op's own code: its panic ends the epoch, as one in
// Apply.
func (w *worker) planCrop(r *run, it *readItem, cfg decode.Config) (d decodePlan, err error) {
	l := r.l
	if l.region == nil || it.store {
		return d, nil
	}
	defer w.recoverOp(r, it.task, &err)
	if d.rect, d.w, d.h, err = l.region.Region(w.actx, cfg.Width, cfg.Height); err != nil {
		return d, r.opFailure(it.task, err)
	}
	d.region = true
	return d, nil
}

// reserve reserves the decode memory sample it needs, decoded as d plans and then
// augmented: the worker's retained share when it fits there, kept for the next sample,
// or else a reservation of its own, which the returned release gives back (nil for a
// share).
func (w *worker) reserve(r *run, it *readItem, cfg decode.Config, d decodePlan) (release func(), err error) {
	l := r.l
	need, iw, ih, err := l.decodeNeed(w.dec, *it, cfg, d)
	if err != nil {
		return nil, err
	}
	chain := l.augment
	if d.region {
		chain = chain[1:]
	}
	opsBytes, ow, oh, err := w.opsSize(r, it, chain, iw, ih)
	if err != nil {
		return nil, err
	}
	need += opsBytes
	if retain := l.dec.retain.Load(); need <= retain {
		return nil, w.holdShare(r, retain)
	}
	// Larger than what a worker keeps: reserve it on its own, holding nothing else
	// while waiting (so workers cannot deadlock), and drop the grown scratch after.
	if need > l.dec.size && opsBytes > need/2 {
		return nil, fmt.Errorf("%w: the augment ops would make a %dx%d image of this %dx%d one, about %d bytes with decoding, more than the %d bytes of decode memory Config.MemoryBudget leaves", decode.ErrTooLarge, ow, oh, cfg.Width, cfg.Height, need, l.dec.size)
	}
	if need > l.dec.size {
		return nil, fmt.Errorf("%w: %dx%d needs about %d bytes of decode memory, more than the %d bytes Config.MemoryBudget leaves for decoding; raise it", decode.ErrTooLarge, cfg.Width, cfg.Height, need, l.dec.size)
	}
	w.unreserve(l)
	t0 := time.Now()
	large, err := l.dec.acquireLarge(r.ctx, need)
	l.tune.memWait.Add(int64(time.Since(t0)))
	if err != nil {
		return nil, err
	}
	return func() {
		w.reset(l)
		large()
		l.returns.dropped(need)
	}, nil
}

// opsSize is Loader.opsNeed for chain on a width×height image, run as the ops' code: a
// panic in an op's OutputSize ends the epoch.
func (w *worker) opsSize(r *run, it *readItem, chain augment.Pipeline, width, height int) (need int64, ow, oh int, err error) {
	defer w.recoverOp(r, it.task, &err)
	need, ow, oh = r.l.opsNeed(chain, width, height)
	return need, ow, oh, nil
}

// holdShare makes the worker hold a retained share of retain bytes, which it keeps
// between samples.
func (w *worker) holdShare(r *run, retain int64) error {
	if w.held == retain {
		return nil
	}
	l := r.l
	w.unreserve(l) // none, or a share from before the worker count changed
	t0 := time.Now()
	err := l.dec.acquire(r.ctx, retain)
	l.tune.memWait.Add(int64(time.Since(t0)))
	if err != nil {
		return err
	}
	w.held = retain
	return nil
}

// decode decodes sample it as d plans, from its record or its file, whole or only the
// crop. ops is the augment chain still to run: without its first op when the crop was
// decoded with the sample.
func (w *worker) decode(l *Loader, it *readItem, d decodePlan) (img *decode.Image, ops augment.Pipeline, err error) {
	ops = l.augment
	switch {
	case it.hit && d.region:
		// Only the bands of rows the crop keeps, then the crop's resampling, exactly as
		// the op's Apply would do it on the whole record.
		var top int
		if img, top, err = w.coder(it.cache).DecodeRows(&w.img, it.ref, it.data, d.rect.Min.Y, d.rect.Max.Y); err == nil {
			img, err = w.actx.Resizer.Resize(w.actx.Next(img), img, d.rect.Sub(image.Pt(0, top)), d.w, d.h)
		}
		ops = ops[1:]
	case it.hit:
		img, err = w.coder(it.cache).Decode(&w.img, it.ref, it.data)
	case d.region:
		img, err = w.dec.DecodeRegion(&w.img, it.data, d.rect, d.w, d.h)
		ops = ops[1:]
	default:
		img, err = w.dec.Decode(&w.img, it.data)
	}
	return img, ops, err
}

// applyOps runs the augment ops on the decoded image; an op's error or panic ends the
// epoch.
func (w *worker) applyOps(r *run, it *readItem, ops augment.Pipeline, img *decode.Image) (out *decode.Image, err error) {
	defer w.recoverOp(r, it.task, &err)
	if out, err = ops.Apply(w.actx, img); err != nil {
		return nil, r.opFailure(it.task, err)
	}
	return out, nil
}

// pack writes out into the sample's slot, mirrored when the folded mirror op draws so,
// then runs the ops on the packed sample (RandomErasing); an error or panic there ends
// the epoch, as an op's.
func (w *worker) pack(r *run, it *readItem, ops augment.Pipeline, out *decode.Image) (err error) {
	defer w.recoverOp(r, it.task, &err)
	l := r.l
	slot := it.b.Data[it.slot*l.sampleBytes : (it.slot+1)*l.sampleBytes]
	if l.mirror != nil && l.mirror.Mirrors(w.actx) {
		err = l.packer.PackMirrored(slot, out)
	} else {
		err = l.packer.Pack(slot, out)
	}
	if err != nil {
		return r.opFailure(it.task, fmt.Errorf("%w (the augment ops must produce the packed size)", err))
	}
	if l.tensorOps {
		// Ops on the packed sample (RandomErasing) continue the sample's random stream;
		// their time counts as packing.
		if err := ops.ApplyTensor(w.actx, l.packer.Sample(slot)); err != nil {
			return r.opFailure(it.task, err)
		}
	}
	return nil
}
