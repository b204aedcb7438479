package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// RingOptions configures a Ring.
type RingOptions struct {
	// Slots is the number of device buffers; required, ≥ 1. A loader uses its prefetch
	// depth: the consumer holds one batch while the next ones are copied.
	Slots int
	// Bytes is the most bytes one Upload copies from the host; required. With Convert it
	// must be a whole number of uint8 samples, and each slot holds their converted size.
	Bytes int
	// Cast, when set, makes Upload convert uint8 NHWC samples on the device; see
	// Converter. Default nil: bytes are copied as they are.
	Cast *Caster
	// MaxBytes, when positive, is the most device memory the ring may take; NewRing fails,
	// before allocating anything, if it needs more. Default 0: no limit.
	MaxBytes int64
}

// EnsureDefaults returns o, or a new RingOptions for a nil o: no field of RingOptions has
// a default to fill (Slots and Bytes are required). NewRing calls it on its copy of the
// options, then Validate, as every constructor in conveyor does.
func (o *RingOptions) EnsureDefaults() *RingOptions {
	if o == nil {
		o = &RingOptions{}
	}
	return o
}

// Validate reports every invalid field of o, joined (errors.Join), each naming its
// field; nil means NewRing can try to allocate the ring.
func (o *RingOptions) Validate() error {
	var errs []error
	if o.Slots < 1 {
		errs = append(errs, fmt.Errorf("gpu: ring: Slots %d must be ≥ 1", o.Slots))
	}
	if o.Bytes < 1 {
		errs = append(errs, fmt.Errorf("gpu: ring: Bytes %d must be ≥ 1", o.Bytes))
	} else if c := o.Cast; c != nil {
		if per := c.InBytes(1); o.Bytes%per != 0 {
			errs = append(errs, fmt.Errorf("gpu: ring: Bytes %d is not a whole number of %dx%d uint8 samples (%d bytes each)", o.Bytes, c.o.Width, c.o.Height, per))
		}
	}
	return errors.Join(errs...)
}

// Ring is a fixed set of device buffers (slots) filled by asynchronous host-to-device
// copies on one non-blocking stream, each followed by an event that says when its slot is
// ready. All device memory is allocated by NewRing and freed by Close (or, for a slot
// held past Close, by its Release); in between the ring allocates nothing.
//
// A slot has one owner from Acquire to Release. Upload enqueues the copy (and the
// conversion) and returns without waiting; Ready, Wait and WaitOn tell or arrange when
// the data is there. Copies into different slots are independent of the consumer's use
// of other slots, so batch k+1 is copied while batch k is in use. Its methods are safe
// for concurrent use.
//
// A slot is reused only after the consumer's work on it: Release records an event on
// every stream the slot was handed to (WaitOn, ReleaseOn), and the next Upload into the
// slot makes the ring's stream wait for those events on the device before it writes, so
// the host never waits for the training step and the step never reads a later batch.
//
// On the host backend without Convert the ring is zero-copy: Upload makes the slot point
// at the host bytes themselves, which must then stay valid until Release, and the ring
// takes no memory of its own.
type Ring struct {
	dev      *Device
	o        RingOptions
	slotSize int64 // device bytes per slot
	zeroCopy bool
	stream   uintptr
	staging  DevicePtr // uint8 input of the converter, shared by the slots (stream-ordered)
	bytes    int64     // device bytes the ring took, fixed from NewRing to Close

	slots []*Slot
	free  chan *Slot
	done  chan struct{} // closed by Close

	upMu sync.Mutex // one Upload at a time: a copy and its conversion share the staging buffer

	mu      sync.Mutex
	closed  bool
	live    int // slots whose memory is not yet freed
	freeErr error

	uploads, blocked atomic.Int64
	blockNs          atomic.Int64
}

// RingStats describes a ring's memory and how often consumers waited on it.
type RingStats struct {
	Slots       int
	Held        int   // slots acquired and not released
	SlotBytes   int64 // device bytes per slot
	DeviceBytes int64 // all device memory the ring holds: slots plus staging; fixed
	Uploads     int64
	Blocked     int64         // Wait calls that found the copy still running
	BlockedTime time.Duration // time spent in those
}

// NewRing allocates the ring's device memory and its stream and events. It copies opts,
// which are required (Slots and Bytes have no defaults), and validates the copy. An
// allocation failure names the bytes requested and the device's free memory.
func (d *Device) NewRing(opts *RingOptions) (*Ring, error) {
	var o RingOptions
	if opts != nil {
		o = *opts
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	r := &Ring{dev: d, o: o, slotSize: int64(o.Bytes), done: make(chan struct{})}
	var staging int64
	if c := o.Cast; c != nil {
		per := c.InBytes(1)
		staging = int64(o.Bytes)
		r.slotSize = int64(c.OutBytes(o.Bytes / per))
	}
	r.zeroCopy = d.kind == Host && o.Cast == nil
	if !r.zeroCopy {
		r.bytes = int64(o.Slots)*r.slotSize + staging
	}
	if o.MaxBytes > 0 && r.bytes > o.MaxBytes {
		return nil, fmt.Errorf("gpu: %s: ring needs %d bytes (%s: %d slots of %d + %d staging), more than its limit of %d",
			d.name, r.bytes, units.Bytes(r.bytes), o.Slots, r.slotSize, staging, o.MaxBytes)
	}
	if err := d.ref(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			r.destroy()
		}
	}()
	var err error
	if r.stream, err = d.drv.newStream(); err != nil {
		return nil, err
	}
	if o.Cast != nil {
		if err := d.drv.loadConverter(); err != nil {
			return nil, err
		}
		if r.staging, err = d.alloc(staging, fmt.Sprintf("ring staging buffer of %s", units.Bytes(staging))); err != nil {
			return nil, err
		}
	}
	r.free = make(chan *Slot, o.Slots)
	for i := range o.Slots {
		s := &Slot{r: r, index: i}
		r.slots = append(r.slots, s)
		r.live++
		if !r.zeroCopy {
			what := fmt.Sprintf("ring slot %d of %d, %s each, %s for the ring", i+1, o.Slots, units.Bytes(r.slotSize), units.Bytes(r.bytes))
			if s.ptr, err = d.alloc(r.slotSize, what); err != nil {
				return nil, err
			}
		}
		if s.event, err = d.drv.newEvent(); err != nil {
			return nil, err
		}
		r.free <- s
	}
	ok = true
	return r, nil
}

// destroy frees whatever a failed NewRing allocated.
func (r *Ring) destroy() {
	for _, s := range r.slots {
		r.freeSlot(s)
	}
	r.finish()
}

// freeSlot frees s's memory and events once the work that may still use it is done: its
// last copy, and the consumer's work recorded at its last Done or Release (a step may
// still read it). It runs once per slot.
func (r *Ring) freeSlot(s *Slot) {
	var errs []error
	if s.event != 0 {
		errs = append(errs, r.dev.drv.syncEvent(s.event))
	}
	s.mu.Lock()
	for _, e := range s.used[:s.pending] {
		errs = append(errs, r.dev.drv.syncEvent(e))
	}
	s.mu.Unlock()
	if !r.zeroCopy {
		errs = append(errs, r.dev.free(s.ptr, r.slotSize))
	}
	if s.event != 0 {
		errs = append(errs, r.dev.drv.destroyEvent(s.event))
	}
	for _, e := range s.used {
		errs = append(errs, r.dev.drv.destroyEvent(e)) // the driver allows destroying a pending event
	}
	s.ptr, s.event, s.used, s.pending = 0, 0, nil, 0
	r.unlive(errors.Join(errs...))
}

// unlive counts one slot fewer alive, recording err; the last one of a closed ring
// frees what the slots shared.
func (r *Ring) unlive(err error) {
	r.mu.Lock()
	r.live--
	r.freeErr = errors.Join(r.freeErr, err)
	last := r.live == 0 && r.closed
	r.mu.Unlock()
	if last {
		r.finish()
	}
}

// finish frees what the slots shared, once none is left, and drops the device reference.
func (r *Ring) finish() {
	var errs []error
	if r.staging != 0 {
		errs = append(errs, r.dev.free(r.staging, int64(r.o.Bytes)))
	}
	if r.stream != 0 {
		errs = append(errs, r.dev.drv.destroyStream(r.stream))
	}
	errs = append(errs, r.dev.unref())
	r.mu.Lock()
	r.staging, r.stream = 0, 0
	r.freeErr = errors.Join(r.freeErr, errors.Join(errs...))
	r.mu.Unlock()
}

// Device returns the ring's device.
func (r *Ring) Device() *Device { return r.dev }

// Stream returns the ring's CUDA stream (CUstream), 0 on the host backend.
func (r *Ring) Stream() uintptr {
	if r.dev.kind == Host {
		return 0
	}
	return r.stream
}

// Stats returns the ring's figures.
func (r *Ring) Stats() RingStats {
	held := 0
	for _, s := range r.slots {
		if s.held.Load() {
			held++
		}
	}
	return RingStats{
		Slots: r.o.Slots, Held: held, SlotBytes: r.slotSize, DeviceBytes: r.bytes,
		Uploads: r.uploads.Load(), Blocked: r.blocked.Load(), BlockedTime: time.Duration(r.blockNs.Load()),
	}
}

// Acquire returns a free slot, waiting while all are held. It fails with ctx's error
// when ctx is done first, and with ErrClosed once the ring is closed.
func (r *Ring) Acquire(ctx context.Context) (*Slot, error) {
	select {
	case <-r.done:
		return nil, ErrClosed
	default:
	}
	select {
	case s := <-r.free:
		return r.take(s)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-r.done:
		return nil, ErrClosed
	}
}

// take hands out s, just received from r.free, unless Close began meanwhile: then its
// drain may have missed s, which is freed here.
func (r *Ring) take(s *Slot) (*Slot, error) {
	r.mu.Lock()
	closed := r.closed
	if !closed {
		s.held.Store(true)
	}
	r.mu.Unlock()
	if closed {
		r.freeSlot(s)
		return nil, ErrClosed
	}
	return s, nil
}

// TryAcquire returns a free slot, or false when all are held or the ring is closed.
func (r *Ring) TryAcquire() (*Slot, bool) {
	select {
	case <-r.done:
		return nil, false
	default:
	}
	select {
	case s := <-r.free:
		s, err := r.take(s)
		return s, err == nil
	default:
		return nil, false
	}
}

// Close waits for the copies in flight, frees the memory of every slot not held, and
// reports the slots still held; their memory is freed when they are released. Closing
// twice is a no-op.
func (r *Ring) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	// Keep finish from running until Close is done with the stream and the free slots,
	// whoever frees the last slot (a Release, or an Acquire that lost the race with Close).
	r.live++
	r.mu.Unlock()
	r.upMu.Lock() // no Upload is half enqueued
	syncErr := r.dev.drv.syncStream(r.stream)
	r.upMu.Unlock()
	for drained := false; !drained; {
		select {
		case s := <-r.free: // an Acquire racing with Close may take one first
			r.freeSlot(s)
		default:
			drained = true
		}
	}
	r.mu.Lock()
	held := r.live - 1
	r.mu.Unlock()
	r.unlive(nil) // drop the extra count
	r.mu.Lock()
	err := errors.Join(syncErr, r.freeErr)
	r.freeErr = nil
	r.mu.Unlock()
	if held > 0 {
		err = errors.Join(err, fmt.Errorf("gpu: %s: ring closed with %d of %d slots held; their memory is freed when they are released", r.dev.name, held, r.o.Slots))
	}
	return err
}
