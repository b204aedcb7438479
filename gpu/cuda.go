package gpu

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/pack"
)

// cudaDriver is one GPU through the driver API, in its primary context (or a context
// the caller supplied).
type cudaDriver struct {
	l       *cudaLib
	name    string // "cuda:N"
	ordinal int
	dev     int32   // CUdevice
	ctx     uintptr // CUcontext
	primary bool    // ctx is the retained primary context, released at the end
	desc    string

	modMu  sync.Mutex
	mod    uintptr
	fns    map[pack.DType]uintptr
	jitLog string // the JIT's info log of the conversion kernels

	polls chan *eventPoll // prepared event queries (queryEvent)
}

// openCUDA opens GPU ordinal in its primary context, or, when ctx is not 0, in that
// context (which the caller keeps alive and current work on it is the caller's).
func openCUDA(ordinal int, ctx uintptr) (*cudaDriver, error) {
	name := fmt.Sprintf("cuda:%d", ordinal)
	l, err := loadCUDA()
	if err != nil {
		return nil, fmt.Errorf("gpu: %s: %w", name, err)
	}
	var count int32
	if r := Result(int32(dl.Call(l.deviceGetCount, uintptr(unsafe.Pointer(&count))))); r != Success {
		return nil, l.err(name, "cuDeviceGetCount", r)
	}
	if ordinal >= int(count) {
		return nil, fmt.Errorf("gpu: %s: no such GPU: the driver (%s) sees %d", name, l.name, count)
	}
	c := &cudaDriver{l: l, name: name, ordinal: ordinal, ctx: ctx}
	if r := Result(int32(dl.Call(l.deviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal)))); r != Success {
		return nil, l.err(name, "cuDeviceGet", r)
	}
	if ctx == 0 {
		if r := Result(int32(dl.Call(l.primaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev)))); r != Success {
			return nil, l.err(name, "cuDevicePrimaryCtxRetain", r)
		}
		c.primary = true
	}
	var buf [256]byte
	var total uint64
	var ver int32
	for _, q := range []struct {
		op string
		r  Result
	}{
		{"cuDeviceGetName", Result(int32(dl.Call(l.deviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)-1), uintptr(c.dev))))},
		{"cuDeviceTotalMem_v2", Result(int32(dl.Call(l.deviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(c.dev))))},
		{"cuDriverGetVersion", Result(int32(dl.Call(l.driverGetVersion, uintptr(unsafe.Pointer(&ver)))))},
	} {
		if q.r != Success {
			if c.primary {
				dl.Call(l.primaryCtxRelease, uintptr(c.dev))
			}
			return nil, l.err(name, q.op, q.r)
		}
	}
	c.desc = fmt.Sprintf("%s, %s, driver %d.%d", strings.TrimRight(string(buf[:]), "\x00"), units.Bytes(int64(total)), ver/1000, ver%1000/10)
	c.newPolls()
	return c, nil
}

func (c *cudaDriver) describe() string { return c.desc }

// call runs fn with args in c's context and makes an *Error of a failure.
//
//go:uintptrescapes
func (c *cudaDriver) call(op string, fn uintptr, args ...uintptr) error {
	if r, cr := c.raw(fn, args...); r != Success {
		return c.l.err(c.name, op, r)
	} else if cr.r != Success {
		return cr.err(c)
	}
	return nil
}

// ctxResult is a failure of the context push or pop around a call.
type ctxResult struct {
	op string
	r  Result
}

func (e ctxResult) err(c *cudaDriver) error { return c.l.err(c.name, e.op, e.r) }

// raw runs fn with args in c's context, pushed onto the calling OS thread for the call and
// popped after, so the thread's own current context (another library's) is left as it
// was. It returns fn's result and, apart, a failure of the push or pop (whose result is
// then not Success); it allocates nothing, so polling costs no garbage.
//
//go:uintptrescapes
func (c *cudaDriver) raw(fn uintptr, args ...uintptr) (Result, ctxResult) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(int32(dl.Call(c.l.ctxPush, c.ctx))); r != Success {
		return Success, ctxResult{"cuCtxPushCurrent_v2", r}
	}
	r := Result(int32(dl.Call(fn, args...)))
	var old uintptr
	if pr := Result(int32(dl.Call(c.l.ctxPop, uintptr(unsafe.Pointer(&old))))); pr != Success {
		return r, ctxResult{"cuCtxPopCurrent_v2", pr}
	}
	return r, ctxResult{r: Success}
}

func (c *cudaDriver) memInfo() (int64, int64, error) {
	var free, total uint64
	err := c.call("cuMemGetInfo_v2", c.l.memGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return int64(free), int64(total), err
}

func (c *cudaDriver) alloc(n int64) (DevicePtr, error) {
	var p uint64
	err := c.call("cuMemAlloc_v2", c.l.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return DevicePtr(p), err
}

func (c *cudaDriver) free(p DevicePtr) error {
	return c.call("cuMemFree_v2", c.l.memFree, uintptr(p))
}

// cuMemHostRegister flag: the memory is pinned for every context, not just this one.
const memHostRegisterPortable = 0x01

func (c *cudaDriver) register(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.call("cuMemHostRegister_v2", c.l.memHostRegister, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), memHostRegisterPortable)
}

func (c *cudaDriver) unregister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.call("cuMemHostUnregister", c.l.memHostUnregister, uintptr(unsafe.Pointer(&b[0])))
}

// Stream and event flags.
const (
	streamNonBlocking  = 0x1 // CU_STREAM_NON_BLOCKING: no implicit sync with the legacy default stream
	eventBlockingSync  = 0x1 // CU_EVENT_BLOCKING_SYNC: cuEventSynchronize sleeps instead of spinning
	eventDisableTiming = 0x2 // CU_EVENT_DISABLE_TIMING: cheaper events
)

func (c *cudaDriver) newStream() (uintptr, error) {
	var s uintptr
	err := c.call("cuStreamCreate", c.l.streamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking)
	return s, err
}

func (c *cudaDriver) destroyStream(s uintptr) error {
	return c.call("cuStreamDestroy_v2", c.l.streamDestroy, s)
}

func (c *cudaDriver) syncStream(s uintptr) error {
	return c.call("cuStreamSynchronize", c.l.streamSynchronize, s)
}

func (c *cudaDriver) newEvent() (uintptr, error) {
	var e uintptr
	err := c.call("cuEventCreate", c.l.eventCreate, uintptr(unsafe.Pointer(&e)), eventBlockingSync|eventDisableTiming)
	return e, err
}

func (c *cudaDriver) destroyEvent(e uintptr) error {
	return c.call("cuEventDestroy_v2", c.l.eventDestroy, e)
}

func (c *cudaDriver) record(e, s uintptr) error {
	return c.call("cuEventRecord", c.l.eventRecord, e, s)
}

// eventPoll is a prepared cuEventQuery between a push and a pop of the driver's context:
// three C calls that allocate nothing (dl.Frame), so polling a copy in a loop makes no
// garbage.
type eventPoll struct {
	push, query, pop dl.Frame
	old              uintptr // where pop stores the context it popped
}

// pollers is how many polls of a driver can run at once without allocating; more fall
// back to raw.
const pollers = 8

func (c *cudaDriver) newPolls() {
	c.polls = make(chan *eventPoll, pollers)
	for range pollers {
		p := &eventPoll{}
		p.push = dl.Frame{Fn: c.l.ctxPush, Args: [6]uintptr{c.ctx}}
		p.query = dl.Frame{Fn: c.l.eventQuery}
		p.pop = dl.Frame{Fn: c.l.ctxPop, Args: [6]uintptr{uintptr(unsafe.Pointer(&p.old))}}
		c.polls <- p
	}
}

// queryEvent runs cuEventQuery(e) in c's context as raw does, without allocating when a
// prepared poll is free.
func (c *cudaDriver) queryEvent(e uintptr) (Result, ctxResult) {
	var p *eventPoll
	select {
	case p = <-c.polls:
	default:
		return c.raw(c.l.eventQuery, e)
	}
	defer func() { c.polls <- p }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(int32(p.push.Call())); r != Success {
		return Success, ctxResult{"cuCtxPushCurrent_v2", r}
	}
	p.query.Args[0] = e
	r := Result(int32(p.query.Call()))
	if pr := Result(int32(p.pop.Call())); pr != Success {
		return r, ctxResult{"cuCtxPopCurrent_v2", pr}
	}
	return r, ctxResult{r: Success}
}

func (c *cudaDriver) query(e uintptr) (bool, error) {
	r, cr := c.queryEvent(e)
	switch {
	case cr.r != Success:
		return false, cr.err(c)
	case r == NotReady:
		return false, nil
	case r != Success:
		return false, c.l.err(c.name, "cuEventQuery", r)
	}
	return true, nil
}

func (c *cudaDriver) syncEvent(e uintptr) error {
	return c.call("cuEventSynchronize", c.l.eventSynchronize, e)
}

func (c *cudaDriver) waitEvent(s, e uintptr) error {
	return c.call("cuStreamWaitEvent", c.l.streamWaitEvent, s, e, 0)
}

func (c *cudaDriver) copyHtoD(dst DevicePtr, src []byte, s uintptr) error {
	return c.call("cuMemcpyHtoDAsync_v2", c.l.memcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), s)
}

// copyHtoDSync is the plain synchronous copy the benchmarks compare against.
func (c *cudaDriver) copyHtoDSync(dst DevicePtr, src []byte) error {
	return c.call("cuMemcpyHtoD_v2", c.l.memcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
}

func (c *cudaDriver) copyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.call("cuMemcpyDtoH_v2", c.l.memcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
}

func (c *cudaDriver) release() error {
	var errs []error
	c.modMu.Lock()
	if c.mod != 0 {
		if err := c.call("cuModuleUnload", c.l.moduleUnload, c.mod); err != nil {
			errs = append(errs, err)
		}
		c.mod, c.fns = 0, nil
	}
	c.modMu.Unlock()
	if c.primary {
		if r := Result(int32(dl.Call(c.l.primaryCtxRelease, uintptr(c.dev)))); r != Success {
			errs = append(errs, c.l.err(c.name, "cuDevicePrimaryCtxRelease_v2", r))
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
