package gpu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// DevicePtr is an address in device memory (CUdeviceptr). On the host backend it is an
// address in host memory.
type DevicePtr uintptr

// Kind says which backend a Device uses.
type Kind int

const (
	Host Kind = iota // no GPU: "device" memory is host memory and copies are memmove
	CUDA             // the CUDA driver, libcuda.so.1
)

func (k Kind) String() string {
	switch k {
	case Host:
		return "host"
	case CUDA:
		return "cuda"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// driver is what a backend provides. Handles (streams, events) are opaque words. Every
// method is safe for concurrent use.
type driver interface {
	describe() string
	memInfo() (free, total int64, err error)
	alloc(n int64) (DevicePtr, error)
	free(p DevicePtr) error
	register(b []byte) error
	unregister(b []byte) error
	newStream() (uintptr, error)
	destroyStream(s uintptr) error
	syncStream(s uintptr) error
	newEvent() (uintptr, error)
	destroyEvent(e uintptr) error
	record(e, s uintptr) error
	query(e uintptr) (bool, error) // true: complete
	syncEvent(e uintptr) error
	waitEvent(s, e uintptr) error // make stream s wait for e without blocking the host
	copyHtoD(dst DevicePtr, src []byte, s uintptr) error
	copyDtoH(dst []byte, src DevicePtr) error
	loadConverter() error // prepares convert; called once per ring that converts
	convert(k *launch, s uintptr) error
	release() error // the last reference is gone: give the context back
}

// Device is one device that batches are copied to: a CUDA GPU, or the host. Open it
// with Open; its methods are safe for concurrent use. Closing a Device with rings still
// open defers freeing until the last ring and slot are released.
type Device struct {
	drv  driver
	kind Kind
	name string // "cpu" or "cuda:N"
	desc string

	allocated atomic.Int64 // device bytes this Device allocated and has not freed

	mu     sync.Mutex
	refs   int // 1 until Close, plus one per ring not yet freed
	closed bool
}

// Open opens a device by name:
//   - "cpu": the host backend; no GPU is used.
//   - "cuda" or "cuda:N": GPU N (default 0) through the CUDA driver, using the device's
//     primary context (so its device pointers are valid for any other CUDA user in the
//     process). It is an error, saying what was missing, when libcuda.so.1 cannot be
//     loaded, has no GPU N, or fails to initialise.
//   - "auto": "cuda:0" when it opens, otherwise the host backend, after one line to logf
//     (which may be nil) saying why.
func Open(name string, logf func(format string, args ...any)) (*Device, error) {
	switch {
	case name == "cpu":
		return newDevice(newHostDriver(nil), Host, "cpu"), nil
	case name == "auto":
		d, err := Open("cuda:0", nil)
		if err == nil {
			return d, nil
		}
		if logf != nil {
			logf("gpu: device auto: no usable GPU, batches stay in host memory (%v)", err)
		}
		return Open("cpu", nil)
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		n := 0
		if s, ok := strings.CutPrefix(name, "cuda:"); ok {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("gpu: device %q: want cuda:N with N a GPU number ≥ 0", name)
			}
			n = v
		}
		drv, err := openCUDA(n, 0)
		if err != nil {
			return nil, err
		}
		return newDevice(drv, CUDA, "cuda:"+strconv.Itoa(n)), nil
	}
	return nil, fmt.Errorf("gpu: unknown device %q (want auto, cpu, cuda or cuda:N)", name)
}

// OpenContext opens GPU ordinal through the CUDA driver using ctx, a CUcontext the caller
// created on that GPU and keeps alive until the Device and its rings are closed, instead
// of the primary context. Device pointers it hands out are valid in ctx. For libraries
// that manage their own contexts (see gpu/cuinterop for gorgonia.org/cu).
func OpenContext(ordinal int, ctx uintptr) (*Device, error) {
	if ctx == 0 {
		return nil, errors.New("gpu: OpenContext: nil context")
	}
	drv, err := openCUDA(ordinal, ctx)
	if err != nil {
		return nil, err
	}
	return newDevice(drv, CUDA, "cuda:"+strconv.Itoa(ordinal)), nil
}

// HostOptions configures a host Device made by NewHost. Every field's zero value is
// valid and is its default, so it needs no EnsureDefaults or Validate.
type HostOptions struct {
	// Fault, when set, is consulted before every driver operation with its name (the
	// CUDA driver function it stands for, such as "cuMemcpyHtoDAsync_v2"); a non-zero
	// Result fails that operation as the driver would. For testing error paths. Default
	// nil: no operation fails on purpose.
	Fault func(op string) Result
}

// NewHost returns a host Device with a copy of o, for tests of error handling. A nil o
// means the defaults: the device Open("cpu") returns.
func NewHost(o *HostOptions) *Device {
	var opts HostOptions
	if o != nil {
		opts = *o
	}
	return newDevice(newHostDriver(&opts), Host, "cpu")
}

func newDevice(drv driver, kind Kind, name string) *Device {
	return &Device{drv: drv, kind: kind, name: name, desc: drv.describe(), refs: 1}
}

// Kind returns the backend.
func (d *Device) Kind() Kind { return d.kind }

// Name returns "cpu" or "cuda:N".
func (d *Device) Name() string { return d.name }

// String describes the device for logs: "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, driver
// 12.8)" or "cpu (host memory)".
func (d *Device) String() string { return d.name + " (" + d.desc + ")" }

// Allocated returns the device bytes currently allocated through d (ring buffers and
// staging), which is what the rings' Stats report summed.
func (d *Device) Allocated() int64 { return d.allocated.Load() }

// MemInfo returns the device's free and total memory.
func (d *Device) MemInfo() (free, total int64, err error) { return d.drv.memInfo() }

// Register page-locks host memory b and maps it for the device, so copies from it run
// asynchronously at full speed (cuMemHostRegister). It suits pinned.Options.Register.
// The host backend does nothing.
func (d *Device) Register(b []byte) error { return d.drv.register(b) }

// Unregister undoes Register; it suits pinned.Options.Unregister.
func (d *Device) Unregister(b []byte) error { return d.drv.unregister(b) }

// Close releases the device. Rings still open keep it alive until they are closed and
// their slots released; Close itself frees nothing they use. Closing twice is a no-op.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.unref()
}

func (d *Device) ref() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.refs++
	return nil
}

func (d *Device) unref() error {
	d.mu.Lock()
	d.refs--
	last := d.refs == 0
	d.mu.Unlock()
	if last {
		return d.drv.release()
	}
	return nil
}

func (d *Device) alloc(n int64, what string) (DevicePtr, error) {
	p, err := d.drv.alloc(n)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Detail = what
			if e.Result == OutOfMemory {
				if free, total, ierr := d.drv.memInfo(); ierr == nil {
					e.Detail += fmt.Sprintf("; %s free of %s", units.Bytes(free), units.Bytes(total))
				}
			}
		}
		return 0, err
	}
	d.allocated.Add(n)
	return p, nil
}

func (d *Device) free(p DevicePtr, n int64) error {
	if p == 0 {
		return nil
	}
	err := d.drv.free(p)
	d.allocated.Add(-n)
	return err
}
