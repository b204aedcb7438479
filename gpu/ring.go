package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	// Convert, when set, makes Upload convert uint8 NHWC samples on the device; see
	// Converter. Default nil: bytes are copied as they are.
	Convert *Converter
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
	} else if c := o.Convert; c != nil {
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

// Slot is one device buffer of a Ring.
type Slot struct {
	r     *Ring
	index int
	ptr   DevicePtr
	event uintptr
	held  atomic.Bool

	mu        sync.Mutex
	n         int       // bytes valid after the last Upload
	err       error     // the last Upload's failure
	consumers []uintptr // streams the holder's work on the slot runs on (WaitOn, ReleaseOn)
	used      []uintptr // events, one per consumer stream at the last Release; made on demand
	pending   int       // used[:pending] were recorded at Done or Release: the next Upload waits for them
	reuseErr  error     // the last Release could not order the next Upload after the consumer
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
	if c := o.Convert; c != nil {
		per := c.InBytes(1)
		staging = int64(o.Bytes)
		r.slotSize = int64(c.OutBytes(o.Bytes / per))
	}
	r.zeroCopy = d.kind == Host && o.Convert == nil
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
	if o.Convert != nil {
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

// Index returns the slot's position in its ring.
func (s *Slot) Index() int { return s.index }

// Ptr returns the slot's device address.
func (s *Slot) Ptr() DevicePtr { return s.ptr }

// Len returns the number of bytes the last Upload put in the slot: the host bytes, or
// their converted size.
func (s *Slot) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// HostBytes returns the slot's Len bytes when its "device" memory is host memory (the
// host backend), after waiting for the last Upload; nil on a GPU.
func (s *Slot) HostBytes() []byte {
	if s.r.dev.kind != Host || s.Wait() != nil {
		return nil
	}
	n := s.Len()
	if n == 0 {
		return nil
	}
	return hostBytes(s.ptr, n)
}

// Size returns the slot's capacity in device bytes (0 on a zero-copy ring).
func (s *Slot) Size() int64 { return s.r.slotSize }

// Upload enqueues the copy of host into the slot (with the ring's conversion) on the
// ring's stream and records the slot's event; it does not wait for the copy. host must
// stay unchanged until the copy is complete (Ready, Wait), and, on a zero-copy ring,
// until Release. For a fully asynchronous copy host should be registered memory (a
// pinned.Pool registered with Device.Register); other memory is copied by the driver
// through a staging buffer, partly synchronously.
func (s *Slot) Upload(host []byte) error {
	s.mustHold("Upload")
	r := s.r
	if len(host) == 0 || len(host) > r.o.Bytes {
		return fmt.Errorf("gpu: upload of %d bytes into a ring of %d-byte slots", len(host), r.o.Bytes)
	}
	c := r.o.Convert
	if c != nil && len(host)%c.InBytes(1) != 0 {
		return fmt.Errorf("gpu: upload of %d bytes is not a whole number of %dx%d uint8 samples", len(host), c.o.Width, c.o.Height)
	}
	r.upMu.Lock()
	defer r.upMu.Unlock()
	select {
	case <-r.done:
		return ErrClosed
	default:
	}
	n, err := len(host), s.afterConsumers()
	switch {
	case err != nil:
	case r.zeroCopy:
		s.ptr = DevicePtr(unsafe.Pointer(&host[0]))
	case c != nil:
		samples := len(host) / c.InBytes(1)
		n = c.OutBytes(samples)
		err = r.dev.drv.copyHtoD(r.staging, host, r.stream)
		if err == nil {
			plane := int64(c.o.Width * c.o.Height)
			err = r.dev.drv.convert(&launch{dst: s.ptr, src: r.staging, pixels: int64(samples) * plane, plane: plane, conv: c}, r.stream)
		}
	default:
		err = r.dev.drv.copyHtoD(s.ptr, host, r.stream)
	}
	if err == nil {
		err = r.dev.drv.record(s.event, r.stream)
	}
	s.mu.Lock()
	s.n, s.err = n, err
	s.mu.Unlock()
	r.uploads.Add(1)
	return err
}

// afterConsumers makes the ring's stream wait, on the device, for the work the slot's
// last holder enqueued on its own streams before releasing it. Called under r.upMu.
func (s *Slot) afterConsumers() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reuseErr; err != nil {
		return err
	}
	for i := range s.pending {
		if err := s.r.dev.drv.waitEvent(s.r.stream, s.used[i]); err != nil {
			return err
		}
	}
	s.pending = 0
	return nil
}

func (s *Slot) mustHold(op string) {
	if !s.held.Load() {
		panic("gpu: " + op + " on a slot that is not held")
	}
}

// Ready reports whether the last Upload is complete, without waiting. An error means
// the upload or the copy failed (a lost device shows here too).
func (s *Slot) Ready() (bool, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return s.r.dev.drv.query(s.event)
}

// Wait blocks until the last Upload is complete (on the host: the calling thread sleeps
// rather than spins) and returns its error, if any.
func (s *Slot) Wait() error {
	if ok, err := s.Ready(); ok || err != nil {
		return err
	}
	t0 := time.Now()
	err := s.r.dev.drv.syncEvent(s.event)
	s.r.blocked.Add(1)
	s.r.blockNs.Add(int64(time.Since(t0)))
	return err
}

// WaitOn makes the CUDA stream (a CUstream of the same context, 0 for the legacy
// default stream) wait for the last Upload before running work enqueued on it later,
// without blocking the host: the way for a training step to use the batch without ever
// waiting on the CPU. The host backend's copies are complete already. Release then
// orders the slot's next Upload after the work enqueued on stream until then.
func (s *Slot) WaitOn(stream uintptr) error {
	s.mustHold("WaitOn")
	s.mu.Lock()
	err := s.err
	if err == nil {
		s.addConsumer(stream)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.r.dev.drv.waitEvent(stream, s.event)
}

// addConsumer notes stream as one the holder's work on the slot runs on. Called under
// s.mu.
func (s *Slot) addConsumer(stream uintptr) {
	if !slices.Contains(s.consumers, stream) {
		s.consumers = append(s.consumers, stream)
	}
}

// Read copies the slot's first len(dst) bytes back to the host, after waiting for the
// last Upload: for tests and debugging.
func (s *Slot) Read(dst []byte) error {
	if err := s.Wait(); err != nil {
		return err
	}
	if len(dst) > s.Len() {
		return fmt.Errorf("gpu: read of %d bytes from a slot holding %d", len(dst), s.Len())
	}
	if s.r.zeroCopy {
		copy(dst, hostBytes(s.ptr, len(dst)))
		return nil
	}
	return s.r.dev.drv.copyDtoH(dst, s.ptr)
}

// Release gives the slot back to its ring (or frees it, if the ring is closed) without
// waiting. The next Upload into the slot waits, on the device, for the work enqueued
// until now on the streams passed to WaitOn: a training step on such a stream may still
// be reading the slot. Work on other streams must be complete before Release, or named
// with ReleaseOn. Releasing a slot not held panics.
func (s *Slot) Release() { s.ReleaseOn() }

// ReleaseOn is Release for a holder whose work on the slot also runs on streams (CUstreams
// of the same context, 0 for the legacy default stream) it did not pass to WaitOn, such
// as a step that waited on the host (Wait) and then launched kernels reading the slot.
func (s *Slot) ReleaseOn(streams ...uintptr) {
	if s.held.Load() {
		s.Done(streams...)
	}
	if !s.held.Swap(false) {
		panic(fmt.Sprintf("gpu: slot %d released twice", s.index))
	}
	r := s.r
	s.mu.Lock()
	s.n, s.err = 0, nil
	if r.zeroCopy {
		s.ptr = 0
	}
	s.mu.Unlock()
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.free <- s // never blocks: capacity is the number of slots
	}
	r.mu.Unlock()
	if closed {
		r.freeSlot(s)
	}
}

// Done says the holder has enqueued all its work on the slot: it records, on every stream
// passed to WaitOn and on streams, an event that the slot's next Upload waits for, as
// Release does, but keeps the slot held; work enqueued on those streams later is not waited
// for. For a holder that must finish with the slot now and give it back later (Release
// then records nothing more, unless WaitOn is called again).
func (s *Slot) Done(streams ...uintptr) {
	s.mustHold("Done")
	s.mu.Lock()
	for _, st := range streams {
		s.addConsumer(st)
	}
	s.afterUse()
	s.mu.Unlock()
}

// afterUse records an event on each consumer stream for the next Upload to wait for. If
// the driver cannot record one, it waits for that stream on the host instead; if that
// fails too (a lost device), the next Upload fails with the error rather than write
// under a running step. On the host backend work is complete when it returns, so there
// is nothing to order. Called under s.mu.
func (s *Slot) afterUse() {
	streams := s.consumers
	s.consumers = s.consumers[:0]
	if s.r.dev.kind == Host {
		return
	}
	drv := s.r.dev.drv
	for _, st := range streams {
		if s.pending == len(s.used) {
			e, err := drv.newEvent()
			if err != nil {
				s.hostWait(st, err)
				continue
			}
			s.used = append(s.used, e)
		}
		if err := drv.record(s.used[s.pending], st); err != nil {
			s.hostWait(st, err)
			continue
		}
		s.pending++
	}
}

// hostWait waits on the host for the consumer stream whose event could not be recorded.
func (s *Slot) hostWait(stream uintptr, recordErr error) {
	if err := s.r.dev.drv.syncStream(stream); err != nil {
		s.reuseErr = fmt.Errorf("gpu: %s: slot %d: cannot order its reuse after the consumer's stream %#x: %w",
			s.r.dev.name, s.index, stream, errors.Join(recordErr, err))
	}
}
