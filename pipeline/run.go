package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

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

	mu      sync.Mutex
	parked  []*Batch         // taken from ready but never delivered
	badSeen map[int]struct{} // files that failed this epoch
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
	n := len(l.trim(l.order))
	if l.cfg.Order.Mode == ShardOrder {
		// The cursor counts positions of the global order: World times this rank's.
		w := l.cfg.Order.World
		if cursor < 0 || cursor > w*n || (cursor%(w*l.micro) != 0 && cursor != w*n) {
			return nil, fmt.Errorf("pipeline: global cursor %d is not a boundary of the global order's %s of %d samples (%d ranks × %d)",
				cursor, l.unit(), w*l.micro, w, l.micro)
		}
		cursor /= w
	} else if cursor < 0 || cursor > n || (cursor%l.micro != 0 && cursor != n) {
		if l.cfg.Batch.MicroBatches > 1 {
			return nil, fmt.Errorf("pipeline: cursor %d is not a micro-batch boundary of an epoch of %d samples (batch %d in %d micro-batches of %d)",
				cursor, n, l.cfg.Batch.Size, l.cfg.Batch.MicroBatches, l.micro)
		}
		return nil, fmt.Errorf("pipeline: cursor %d is not a batch boundary of an epoch of %d samples (batch %d)", cursor, n, l.cfg.Batch.Size)
	}
	r := &run{
		l:       l,
		epoch:   e,
		order:   l.order[:n],
		tasks:   make(chan task, 2*l.cfg.Tuning.Workers+l.cfg.Tuning.IOWorkers),
		retry:   make(chan task, l.nbuf*l.micro),
		decodeQ: make(chan readItem, 2*l.cfg.Tuning.Workers),
		ready:   make(chan *Batch, l.nbuf),
		out:     make(chan *Batch, l.nbuf),
		quit:    make(chan struct{}),
	}
	if l.planner != nil {
		if err := l.planner.PlanEpoch(e, r.order[cursor:]); err != nil {
			return nil, err
		}
	}
	if c := l.cfg.SampleCache; c != nil {
		// Pick up what other loaders sharing the directory stored since.
		if err := c.Refresh(); err != nil {
			l.cfg.Logf("pipeline: %v", err)
		}
	}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	l.run = r
	l.stats.epochs.Add(1)
	r.wg.Add(2 + l.tune.maxIO + len(l.workers))
	go r.dispatch(cursor)
	go r.transfer()
	for i := range l.tune.maxIO {
		go r.reader(i)
	}
	for i, w := range l.workers {
		go r.work(w, i)
	}
	if l.tune.on() {
		r.wg.Add(1)
		go r.control()
	}
	return r, nil
}

// trim cuts an epoch order to what is read: whole batches only with DropLast.
func (l *Loader) trim(order []int32) []int32 {
	if l.cfg.Batch.DropLast {
		return order[:len(order)-len(order)%l.cfg.Batch.Size]
	}
	return order
}

// unit names what a cursor counts in: batches or micro-batches.
func (l *Loader) unit() string {
	if l.cfg.Batch.MicroBatches > 1 {
		return "micro-batches"
	}
	return "batches"
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

// firstBad reports whether sample i failed for the first time this epoch.
func (r *run) firstBad(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.badSeen[i]; ok {
		return false
	}
	if r.badSeen == nil {
		r.badSeen = map[int]struct{}{}
	}
	r.badSeen[i] = struct{}{}
	return true
}
