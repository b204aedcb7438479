package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

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
	}
	if it.b.remaining.Add(-1) == 0 {
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
	w.actx = augment.NewContext()
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
		img, err = w.coder(it.cache).Decode(&w.img, it.ref, it.data)
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
