package pipeline

import (
	"time"
)

type task struct {
	b       *Batch
	slot    int
	pos     int   // position in the epoch order: this rank's, or the global one with ShardOrder
	local   int   // position in this rank's epoch order (run.order)
	idx     int   // source index to load
	attempt int32 // 0 for the original sample, then replacements
	noCache bool  // its cached record was damaged: decode the source
}

// dispatch walks the epoch order batch by batch (micro-batch by micro-batch with
// Config.Batch.MicroBatches): it takes a buffer (waiting while all are in use: this is what
// bounds memory), queues the batch for in-order delivery, then hands its slots to the
// readers.
func (r *run) dispatch(cursor int) {
	defer r.wg.Done()
	defer close(r.ready)
	l := r.l
	bs, m := l.cfg.Batch.Size, l.micro
	var inflight []*Batch
	for start := cursor; start < len(r.order); start += m {
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
			waited := time.Since(t0)
			l.fill.Idled(waited * time.Duration(l.tune.workers.Load()))
			l.tune.poolWait.Add(int64(waited))
		}
		// The whole batch this micro-batch belongs to starts at position first and holds
		// whole samples; a short last batch is cut into fewer micro-batches, the last
		// short. Without MicroBatches m == bs, and this is the whole batch.
		first := start - start%bs
		whole := min(bs, len(r.order)-first)
		n := min(m, len(r.order)-start)
		b := &Batch{
			Epoch: r.epoch, Number: start / bs, Micro: (start - first) / m, Micros: (whole + m - 1) / m,
			Cursor: start + n, GlobalCursor: l.cfg.Order.World * (start + n), Len: n, BatchLen: whole,
			Data: buf.Bytes()[:n*l.sampleBytes], Layout: l.cfg.Pack.Layout, DType: l.cfg.Pack.DType,
			Labels: make([]int32, n), Indices: make([]int64, n),
			buf: buf, ld: l, done: make(chan struct{}), hostU8: l.cfg.Device.Cast,
		}
		b.Shape = l.shape(n)
		if l.classes > 0 {
			b.Targets, b.NumClasses, b.tfree = l.takeTargets(n), l.classes, l.tfree
		}
		b.meta, b.Mix.Lambda = l.meta, 1
		b.remaining.Store(int32(n))
		if l.cfg.Order.Mode == ShardOrder {
			b.Cursor = b.GlobalCursor // EpochFrom takes global cursors
		}
		r.ready <- b // never blocks: capacity is the number of buffers
		for s := range n {
			t := task{b: b, slot: s, pos: l.sampler.global(start + s), local: start + s, idx: int(r.order[start+s])}
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
		if start == cursor {
			r.planAhead() // the first batch is on its way
		}
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

// planAhead gives an EpochPlanner source the next epoch's order (from its start) as this
// epoch begins, so its look-ahead can run on into the next epoch while this one ends. It
// runs in the dispatcher, which owns the look-ahead sampler and order buffer (the order
// is a function of seed and epoch only).
func (r *run) planAhead() {
	l := r.l
	p := l.planner
	if p == nil || r.ctx.Err() != nil {
		return
	}
	if l.ahead == nil {
		ahead := l.sampler
		ahead.perm, ahead.shards = nil, nil // its own scratch
		l.ahead = &ahead
	}
	l.nextOrder = l.ahead.order(r.epoch+1, l.nextOrder)
	p.PlanNext(r.epoch+1, l.trim(l.nextOrder))
}
