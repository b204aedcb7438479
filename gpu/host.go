package gpu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// hostDriver is the backend without a GPU: allocations are Go memory, copies are memmove
// and conversion runs on the CPU, so every operation is complete when it returns and
// events are always ready. It follows the CUDA driver's contract otherwise, including
// its error codes, so rings behave the same on both.
type hostDriver struct {
	fault func(op string) Result

	mu     sync.Mutex
	mem    map[DevicePtr][]byte
	next   atomic.Uintptr // stream and event handles
	events map[uintptr]Result
}

func newHostDriver(o *HostOptions) *hostDriver {
	h := &hostDriver{mem: map[DevicePtr][]byte{}, events: map[uintptr]Result{}}
	if o != nil {
		h.fault = o.Fault
	}
	return h
}

func (h *hostDriver) check(op string) error {
	if h.fault == nil {
		return nil
	}
	if r := h.fault(op); r != Success {
		return &Error{Device: "cpu", Op: op, Result: r, Name: r.Name()}
	}
	return nil
}

func (h *hostDriver) describe() string { return "host memory" }

func (h *hostDriver) memInfo() (int64, int64, error) {
	if err := h.check("cuMemGetInfo_v2"); err != nil {
		return 0, 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var used int64
	for _, b := range h.mem {
		used += int64(len(b))
	}
	// Host memory has no fixed size here; report what is in use as the total.
	return 0, used, nil
}

func (h *hostDriver) alloc(n int64) (DevicePtr, error) {
	if err := h.check("cuMemAlloc_v2"); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, &Error{Device: "cpu", Op: "cuMemAlloc_v2", Result: InvalidValue, Name: InvalidValue.Name()}
	}
	// Whole 8-byte words, so the memory is aligned for every element type.
	words := make([]uint64, (n+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	p := DevicePtr(unsafe.Pointer(&b[0]))
	h.mu.Lock()
	h.mem[p] = b
	h.mu.Unlock()
	return p, nil
}

func (h *hostDriver) free(p DevicePtr) error {
	if err := h.check("cuMemFree_v2"); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.mem[p]; !ok {
		return &Error{Device: "cpu", Op: "cuMemFree_v2", Result: InvalidValue, Name: InvalidValue.Name(), Detail: fmt.Sprintf("%#x was not allocated", p)}
	}
	delete(h.mem, p)
	return nil
}

// bytes returns the n bytes at p, which must lie in one allocation.
func (h *hostDriver) bytes(op string, p DevicePtr, n int) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for base, b := range h.mem {
		if p >= base && uintptr(p-base)+uintptr(n) <= uintptr(len(b)) {
			off := int(p - base)
			return b[off : off+n], nil
		}
	}
	return nil, &Error{Device: "cpu", Op: op, Result: InvalidValue, Name: InvalidValue.Name(), Detail: fmt.Sprintf("%d bytes at %#x are not allocated", n, p)}
}

func (h *hostDriver) register([]byte) error   { return h.check("cuMemHostRegister_v2") }
func (h *hostDriver) unregister([]byte) error { return h.check("cuMemHostUnregister") }

func (h *hostDriver) newStream() (uintptr, error) {
	if err := h.check("cuStreamCreate"); err != nil {
		return 0, err
	}
	return h.next.Add(1), nil
}

func (h *hostDriver) destroyStream(uintptr) error { return h.check("cuStreamDestroy_v2") }
func (h *hostDriver) syncStream(uintptr) error    { return h.check("cuStreamSynchronize") }

func (h *hostDriver) newEvent() (uintptr, error) {
	if err := h.check("cuEventCreate"); err != nil {
		return 0, err
	}
	e := h.next.Add(1)
	h.mu.Lock()
	h.events[e] = Success
	h.mu.Unlock()
	return e, nil
}

func (h *hostDriver) destroyEvent(e uintptr) error {
	h.mu.Lock()
	delete(h.events, e)
	h.mu.Unlock()
	return h.check("cuEventDestroy_v2")
}

func (h *hostDriver) record(uintptr, uintptr) error { return h.check("cuEventRecord") }

func (h *hostDriver) query(uintptr) (bool, error) {
	if err := h.check("cuEventQuery"); err != nil {
		return false, err
	}
	return true, nil
}

func (h *hostDriver) syncEvent(uintptr) error          { return h.check("cuEventSynchronize") }
func (h *hostDriver) waitEvent(uintptr, uintptr) error { return h.check("cuStreamWaitEvent") }

func (h *hostDriver) copyHtoD(dst DevicePtr, src []byte, _ uintptr) error {
	if err := h.check("cuMemcpyHtoDAsync_v2"); err != nil {
		return err
	}
	d, err := h.bytes("cuMemcpyHtoDAsync_v2", dst, len(src))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

func (h *hostDriver) copyDtoH(dst []byte, src DevicePtr) error {
	if err := h.check("cuMemcpyDtoH_v2"); err != nil {
		return err
	}
	s, err := h.bytes("cuMemcpyDtoH_v2", src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (h *hostDriver) loadConverter() error { return h.check("cuModuleLoadData") }

func (h *hostDriver) convert(k *launch, _ uintptr) error {
	if err := h.check("cuLaunchKernel"); err != nil {
		return err
	}
	in, err := h.bytes("cuLaunchKernel", k.src, int(k.pixels*3))
	if err != nil {
		return err
	}
	out, err := h.bytes("cuLaunchKernel", k.dst, int(k.pixels*3)*k.conv.packer.Options().DType.Size())
	if err != nil {
		return err
	}
	return k.conv.Host(out, in)
}

func (h *hostDriver) release() error { return nil }

// hostBytes is the n bytes of host memory at p, an address of Go or mapped memory that
// its owner keeps alive.
func hostBytes(p DevicePtr, n int) []byte {
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), n)
}
