package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

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
	c := r.o.Cast
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
