package pipeline

import (
	"errors"
	"fmt"

	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/pinned"
)

// openDevice opens the device, maps the pinned batch buffers (registered with the
// driver on a GPU) and allocates the device ring. On failure it undoes what it did.
func (l *Loader) openDevice(conv *gpu.Caster, batchBytes, pinnedBytes int64) (err error) {
	c := &l.cfg
	l.dev = c.Device.GPU
	if l.dev == nil {
		if l.dev, err = gpu.Open(c.Device.Name, c.Logf); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		l.ownDev = true
	}
	defer func() {
		if err != nil {
			l.closeDevice()
		}
	}()
	// The tuner maps buffers beyond the starting Prefetch+1 when it raises the depth.
	o := &pinned.Options{BufferSize: int(batchBytes), Budget: pinnedBytes, Initial: c.Tuning.Prefetch + 1}
	onGPU := l.dev.Kind() != gpu.Host
	if onGPU {
		// The driver page-locks the slabs when it registers them. A driver that refuses
		// (some virtual machines) leaves them unregistered: copies still work, partly
		// synchronously.
		lock := false
		o.Lock, o.Register, o.Unregister, o.RegisterOptional = &lock, l.dev.Register, l.dev.Unregister, true
	}
	if l.pool, err = pinned.New(o); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if st := l.pool.Stats(); st.MaxBuffers != l.nbuf || st.Buffers != c.Tuning.Prefetch+1 {
		return fmt.Errorf("pipeline: pinned pool holds %d batch buffers of %d, want %d of %d", st.Buffers, st.MaxBuffers, c.Tuning.Prefetch+1, l.nbuf)
	}
	if st := l.pool.Stats(); !onGPU && !st.Locked {
		c.Logf("pipeline: batch buffers are not page-locked (%s); host-to-device copies may be slower", st.LockError)
	} else if onGPU && !st.Registered {
		c.Logf("pipeline: the driver did not register the batch buffers (%s): copies to %s go on from unregistered memory, partly synchronously and slower (Stats.Memory.Pinned.Registered)", st.RegisterError, l.dev.Name())
	}
	// A GPU ring holds Prefetch batches: the one the consumer has and those copied ahead.
	// The host's zero-copy ring costs nothing, so it has one slot per pinned buffer.
	l.slots = c.Tuning.Prefetch
	if !onGPU && conv == nil {
		l.slots = l.nbuf
	}
	if l.ring, err = l.dev.NewRing(&gpu.RingOptions{Slots: l.slots, Bytes: int(batchBytes), Cast: conv}); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if onGPU {
		l.startReleaser()
		st := l.ring.Stats()
		c.Logf("pipeline: delivering batches to %v: %d device buffers of %d bytes, %d bytes in all", l.dev, st.Slots, st.SlotBytes, st.DeviceBytes)
	}
	return nil
}

// releaseLater hands a released batch's buffers whose copy to the GPU is still running
// (queued behind earlier training steps that still read the slot's previous batch, say) to
// the releaser goroutine, which gives them back when the copy is complete, so that the
// consumer's Release never waits for the GPU. It reports false when the copy is complete
// (or failed), on the host backend, or after Close: then the caller gives them back.
func (l *Loader) releaseLater(buf *pinned.Buffer, s *gpu.Slot) bool {
	if l.later == nil {
		return false
	}
	if ok, err := s.Ready(); ok || err != nil {
		return false
	}
	l.laterMu.RLock()
	defer l.laterMu.RUnlock()
	if l.laterClosed {
		return false
	}
	l.later <- heldCopy{buf, s} // never blocks: capacity is the number of buffers
	return true
}

// heldCopy is a released batch's buffers, waiting for their copy.
type heldCopy struct {
	buf  *pinned.Buffer
	slot *gpu.Slot
}

// startReleaser starts the goroutine behind releaseLater; closeDevice joins it.
func (l *Loader) startReleaser() {
	l.later = make(chan heldCopy, l.nbuf)
	l.laterDone = make(chan struct{})
	go func() {
		defer close(l.laterDone)
		for h := range l.later {
			giveBack(h.buf, h.slot)
		}
	}()
}

// closeDevice frees the ring, the pinned buffers and the device, as far as they exist.
// Buffers and slots the caller still holds are freed when released.
func (l *Loader) closeDevice() error {
	if l.later != nil {
		l.laterMu.Lock()
		if !l.laterClosed {
			l.laterClosed = true
			close(l.later)
		}
		l.laterMu.Unlock()
		<-l.laterDone // the copies it waits for end, or fail, without the consumer
	}
	var errs []error
	if l.ring != nil {
		errs = append(errs, l.ring.Close())
	}
	if l.pool != nil {
		l.pool.Close() // buffers still out are unmapped when released
	}
	if l.ownDev && l.dev != nil {
		errs = append(errs, l.dev.Close())
	}
	return errors.Join(errs...)
}
