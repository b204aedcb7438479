package pipeline

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// Epoch streams epoch e's batches in order. Breaking out of the loop stops the work; the
// iterator returns only after every goroutine it started has exited. An error is yielded
// at most once, as the last value. Batches stay valid until Release.
func (l *Loader) Epoch(ctx context.Context, e int) iter.Seq2[*Batch, error] {
	return l.EpochFrom(ctx, e, 0)
}

// EpochFrom resumes epoch e at cursor, the number of this epoch's samples already consumed
// (a multiple of BatchSize, or of BatchSize/MicroBatches with Config.Batch.MicroBatches, as
// Batch.Cursor reports): the batches it yields are exactly those an uninterrupted Epoch
// would have yielded from there on, starting mid-batch with the next micro-batch. With
// Config.Order.Mode ShardOrder, cursor is a position in the global order (Batch.Cursor and
// Batch.GlobalCursor, a multiple of World × BatchSize/MicroBatches), so a checkpoint
// taken at one World resumes at another that divides Partitions: the global batches
// that follow are those the uninterrupted run would have delivered. The cursor is read
// in this Loader's configuration: given with another global batch (BatchSize × World),
// a cursor on a boundary of the new one resumes with exactly the samples not yet
// delivered, one on none is refused, and with MicroBatches one inside a new global batch
// skips or repeats some of its samples (see docs/DESIGN.md, "Resume").
func (l *Loader) EpochFrom(ctx context.Context, e, cursor int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		r, err := l.start(ctx, e, cursor)
		if err != nil {
			yield(nil, err)
			return
		}
		defer l.finish(r)
		// The distinct files that failed in the batches delivered so far: counted here, in
		// batch order, so where MaxBadFraction is crossed does not depend on timing.
		bad := map[int]struct{}{}
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
			for _, i := range b.badFiles() {
				bad[i] = struct{}{}
			}
			if err := b.failure(); err == nil && l.cfg.Bad.MaxFraction >= 0 && len(bad) > 1 && float64(len(bad)) > l.cfg.Bad.MaxFraction*float64(len(r.order)) {
				b.setErr(-1, fmt.Errorf("pipeline: %d bad files in epoch %d of %d samples exceed MaxBadFraction %g; last: %w",
					len(bad), r.epoch, len(r.order), l.cfg.Bad.MaxFraction, b.lastBad()))
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
		if r.l.outstanding.Load() >= int64(min(int(r.l.tune.prefetch.Load())+1, r.l.slots)) {
			return nil, ErrHeld
		}
		select {
		case b, ok = <-r.out:
		case <-r.ctx.Done():
			return nil, r.stopped()
		}
	}
	if !ok {
		if r.xferErr != nil {
			return nil, r.xferErr // written before out was closed
		}
		// The transfer stage ended cleanly, but a Close since may have taken back the
		// batches it had passed on (reclaim drains out): the epoch did not end, it was
		// stopped, and saying so keeps a consumer from taking it for a complete one.
		if err := r.cause(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if r.ctx.Err() != nil {
		r.putBack(b)
		return nil, r.stopped()
	}
	return b, nil
}
