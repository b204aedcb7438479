package pipeline

import (
	"time"
)

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
