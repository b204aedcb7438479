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
	inOps  bool  // the augment ops' code (Region, OutputSize, Apply) or the packer is running

	labels []int      // a sample's labels, for its target row
	pcg    rand.PCG   // the batch mixing draw's generator, reseeded per batch
	rng    *rand.Rand // over pcg
	mixer  mixup.Mixer
}

// guarded runs sample, turning a panic into an error that carries the stack: in the
// decoder, a bad sample (hostile bytes found a decoder bug; the file is named and skipped
// when skipping); in an augment op or the packer, an error that ends the epoch, as any op
// error after New does. The worker's state is rebuilt, since the panic may have left it
// half-written.
func (w *worker) guarded(r *run, it readItem) (err error) {
	w.inOps = false
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		p := &PanicError{Value: v, Stack: debug.Stack()}
		w.reset(r.l)
		if w.inOps {
			err = r.opFailure(it.task, p)
		} else {
			err = fmt.Errorf("decoding: %w", p)
		}
	}()
	return w.sample(r, it)
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
	// The random stream starts here, so drawing the crop before reserving memory for it
	// takes the same numbers as drawing it when decoding would.
	w.actx.Seed(l.cfg.Order.Seed, uint64(r.epoch), int64(it.idx)+int64(it.attempt)<<40)
	var d decodePlan
	w.inOps = true // the ops' own code: a panic in Region ends the epoch, as one in Apply
	if l.region != nil && !it.store {
		// Crop-aware decode: draw the crop from the header's (or record's) size, decode
		// only it.
		var err error
		if d.rect, d.w, d.h, err = l.region.Region(w.actx, cfg.Width, cfg.Height); err != nil {
			return r.opFailure(it.task, err)
		}
		d.region = true
	}
	w.inOps = false
	need, iw, ih, err := l.decodeNeed(w.dec, it, cfg, d)
	if err != nil {
		return err
	}
	chain := l.augment
	if d.region {
		chain = chain[1:]
	}
	w.inOps = true
	opsBytes, ow, oh := l.opsNeed(chain, iw, ih)
	w.inOps = false
	need += opsBytes
	if retain := l.dec.retain.Load(); need <= retain {
		if w.held != retain {
			w.unreserve(l) // none, or a share from before the worker count changed
			t0 := time.Now()
			err := l.dec.acquire(r.ctx, retain)
			l.tune.memWait.Add(int64(time.Since(t0)))
			if err != nil {
				return err
			}
			w.held = retain
		}
	} else {
		// Larger than what a worker keeps: reserve it on its own, holding nothing else
		// while waiting (so workers cannot deadlock), and drop the grown scratch after.
		if need > l.dec.size && opsBytes > need/2 {
			return fmt.Errorf("%w: the augment ops would make a %dx%d image of this %dx%d one, about %d bytes with decoding, more than the %d bytes of decode memory Config.MemoryBudget leaves", decode.ErrTooLarge, ow, oh, cfg.Width, cfg.Height, need, l.dec.size)
		}
		if need > l.dec.size {
			return fmt.Errorf("%w: %dx%d needs about %d bytes of decode memory, more than the %d bytes Config.MemoryBudget leaves for decoding; raise it", decode.ErrTooLarge, cfg.Width, cfg.Height, need, l.dec.size)
		}
		w.unreserve(l)
		t0 := time.Now()
		release, err := l.dec.acquireLarge(r.ctx, need)
		l.tune.memWait.Add(int64(time.Since(t0)))
		if err != nil {
			return err
		}
		defer func() {
			w.reset(l)
			release()
			l.returns.dropped(need)
		}()
	}
	t0 := time.Now()
	ops := l.augment
	var img *decode.Image
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
	w.inOps = true
	out, err := ops.Apply(w.actx, img)
	if err != nil {
		return r.opFailure(it.task, err)
	}
	t2 := l.stats.augment.add(t1, 1)
	if l.cfg.StopAfter == AugmentStage {
		l.fill.Worked(t2.Sub(t0))
		return nil
	}
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
	t3 := l.stats.pack.add(t2, int64(l.sampleBytes))
	l.fill.Worked(t3.Sub(t0))
	l.returns.check(t3)
	return nil
}
