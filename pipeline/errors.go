package pipeline

import (
	"errors"
	"fmt"

	"github.com/conveyor-ml/conveyor/internal/seed"
)

// ErrClosed is returned by a Loader that has been closed.
var ErrClosed = errors.New("pipeline: loader closed")

// ErrBusy is returned when an epoch is started while another is still being iterated.
var ErrBusy = errors.New("pipeline: another epoch is running")

// ErrHeld is returned when the caller holds every batch buffer without releasing any, so
// no further batch could ever be assembled.
var ErrHeld = errors.New("pipeline: every batch buffer is held by the caller; Release batches when done with them")

// maxAttempts bounds how many replacements a slot tries under Skip before the epoch fails;
// with ShardOrder the first nearAttempts are drawn near the bad sample.
const (
	maxAttempts  = 64
	nearAttempts = 4
)

var errEpochDone = errors.New("pipeline: epoch done")

// fail records a bad sample and applies the policy. It reports whether a replacement
// was queued; otherwise the slot is finished with an error on its batch.
func (r *run) fail(t task, err error) bool {
	l := r.l
	bad := &SampleError{Path: l.src.Path(t.idx), Index: t.idx, Epoch: r.epoch, Err: err}
	// A bad file may be drawn again as another slot's replacement: count and log it once
	// per epoch, and count the draws apart.
	if r.firstBad(t.idx) {
		l.stats.addBad(bad)
		l.cfg.Logf("%v", bad)
	}
	l.stats.badDraws.Add(1)
	if l.conv != nil {
		l.conv.addBad(bad) // converting: record it, replace nothing
		return false
	}
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
	h := seed.Mix(seed.Mix(l.cfg.Seed, uint64(r.epoch)), uint64(t.pos)<<8|uint64(t.attempt))
	if l.sampler.parts == 0 || t.attempt > nearAttempts {
		t.idx = int(h % uint64(l.src.Len()))
	} else {
		// ShardOrder: a sample near it in its partition's sequence, which comes from the
		// shards being read (a remote dataset need not fetch a shard for one sample),
		// within half a shuffle block on the first attempt, twice as far on each next;
		// past nearAttempts (a lost shard can fill a block), anywhere.
		span := max(l.cfg.ShuffleBlock/2, 1) << (t.attempt - 1)
		d := int(h%uint64(2*span)) - span
		if d >= 0 {
			d++ // never the bad sample itself
		}
		t.idx = int(r.order[l.sampler.near(t.local, d)])
	}
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

// opFailure is an augment op's or the packer's error on sample t: ops are validated by
// New, so a failure after that is a bug in the op, not a bad file, and ends the epoch
// whatever the policy. It names the sample the op failed on.
func (r *run) opFailure(t task, err error) error {
	return &fatalError{&SampleError{Path: r.l.src.Path(t.idx), Index: t.idx, Epoch: r.epoch,
		Err: fmt.Errorf("augment %v: %w", r.l.cfg.Augment, err)}}
}

// PanicError is a panic recovered in a loader goroutine: in a decoder (a bad sample), in
// an augment op, the packer or a Source (an error that ends the epoch). It carries the
// stack of the goroutine that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }
