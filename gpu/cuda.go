package gpu

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu/kernels"
	"github.com/conveyor-ml/conveyor/internal/dl"
	"github.com/conveyor-ml/conveyor/pack"
)

// libcudaEnv names a different driver library to load, for unusual installs (and for the
// tests' stand-in driver).
const libcudaEnv = "CONVEYOR_LIBCUDA"

// cuda holds the driver's entry points, bound once per process.
type cudaLib struct {
	name string

	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceTotalMem uintptr
	primaryCtxRetain, primaryCtxRelease, ctxPush, ctxPop                             uintptr
	memGetInfo, memAlloc, memFree, memHostRegister, memHostUnregister                uintptr
	streamCreate, streamDestroy, streamSynchronize, streamWaitEvent                  uintptr
	eventCreate, eventDestroy, eventRecord, eventQuery, eventSynchronize             uintptr
	memcpyHtoDAsync, memcpyHtoD, memcpyDtoH                                          uintptr
	moduleLoadData, moduleGetFunction, moduleUnload, launchKernel                    uintptr
	getErrorName, getErrorString                                                     uintptr
}

// cudaLibs caches loadCUDA's result per library name.
var (
	cudaMu   sync.Mutex
	cudaLibs = map[string]*cudaLoad{}
)

type cudaLoad struct {
	l   *cudaLib
	err error
}

// loadCUDA binds libcuda.so.1 (or $CONVEYOR_LIBCUDA) and runs cuInit, once per library.
func loadCUDA() (*cudaLib, error) {
	name := os.Getenv(libcudaEnv)
	if name == "" {
		name = dl.Name("libcuda.so.1", "libcuda.dylib")
	}
	cudaMu.Lock()
	defer cudaMu.Unlock()
	if c, ok := cudaLibs[name]; ok {
		return c.l, c.err
	}
	l, err := bindCUDA(name)
	cudaLibs[name] = &cudaLoad{l, err}
	return l, err
}

func bindCUDA(name string) (*cudaLib, error) {
	l := &cudaLib{name: name}
	if !dl.Supported {
		return nil, fmt.Errorf("cannot load %s: run-time loading is not supported on %s/%s", name, runtime.GOOS, runtime.GOARCH)
	}
	err := dl.Bind("gpu", name, map[string]*uintptr{
		"cuInit": &l.init, "cuDriverGetVersion": &l.driverGetVersion, "cuDeviceGetCount": &l.deviceGetCount,
		"cuDeviceGet": &l.deviceGet, "cuDeviceGetName": &l.deviceGetName, "cuDeviceTotalMem_v2": &l.deviceTotalMem,
		"cuDevicePrimaryCtxRetain": &l.primaryCtxRetain, "cuDevicePrimaryCtxRelease_v2": &l.primaryCtxRelease,
		"cuCtxPushCurrent_v2": &l.ctxPush, "cuCtxPopCurrent_v2": &l.ctxPop,
		"cuMemGetInfo_v2": &l.memGetInfo, "cuMemAlloc_v2": &l.memAlloc, "cuMemFree_v2": &l.memFree,
		"cuMemHostRegister_v2": &l.memHostRegister, "cuMemHostUnregister": &l.memHostUnregister,
		"cuStreamCreate": &l.streamCreate, "cuStreamDestroy_v2": &l.streamDestroy,
		"cuStreamSynchronize": &l.streamSynchronize, "cuStreamWaitEvent": &l.streamWaitEvent,
		"cuEventCreate": &l.eventCreate, "cuEventDestroy_v2": &l.eventDestroy, "cuEventRecord": &l.eventRecord,
		"cuEventQuery": &l.eventQuery, "cuEventSynchronize": &l.eventSynchronize,
		"cuMemcpyHtoDAsync_v2": &l.memcpyHtoDAsync, "cuMemcpyHtoD_v2": &l.memcpyHtoD, "cuMemcpyDtoH_v2": &l.memcpyDtoH,
		"cuModuleLoadData": &l.moduleLoadData, "cuModuleGetFunction": &l.moduleGetFunction,
		"cuModuleUnload": &l.moduleUnload, "cuLaunchKernel": &l.launchKernel,
		"cuGetErrorName": &l.getErrorName, "cuGetErrorString": &l.getErrorString,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot load the CUDA driver (is the NVIDIA driver installed?): %w", err)
	}
	if r := Result(int32(dl.Call(l.init, 0))); r != Success {
		return nil, l.err("", "cuInit", r)
	}
	return l, nil
}

// cstring copies the NUL-terminated C string at p.
func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	b := *(**[1 << 16]byte)(unsafe.Pointer(&p))
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

// err makes the *Error for a failed call, asking the driver for the code's name and
// description.
func (l *cudaLib) err(dev, op string, r Result) *Error {
	e := &Error{Device: dev, Op: op, Result: r, Name: r.Name()}
	if dev == "" {
		e.Device = "cuda"
	}
	var p uintptr
	if Result(int32(dl.Call(l.getErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))))) == Success {
		if s := cstring(p); s != "" {
			e.Name = s
		}
	}
	p = 0
	if Result(int32(dl.Call(l.getErrorString, uintptr(r), uintptr(unsafe.Pointer(&p))))) == Success {
		e.Desc = cstring(p)
	}
	return e
}

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

	modMu sync.Mutex
	mod   uintptr
	fns   map[pack.DType]uintptr
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
	dl.Call(l.deviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)-1), uintptr(c.dev))
	var total uint64
	dl.Call(l.deviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(c.dev))
	var ver int32
	dl.Call(l.driverGetVersion, uintptr(unsafe.Pointer(&ver)))
	c.desc = fmt.Sprintf("%s, %s, driver %d.%d", strings.TrimRight(string(buf[:]), "\x00"), fmtBytes(int64(total)), ver/1000, ver%1000/10)
	return c, nil
}

func (c *cudaDriver) describe() string { return c.desc }

// call runs fn with args in c's context, pushed onto the calling OS thread for the call
// and popped after, so the thread's own current context (another library's) is left as
// it was.
//
//go:uintptrescapes
func (c *cudaDriver) call(op string, fn uintptr, args ...uintptr) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(int32(dl.Call(c.l.ctxPush, c.ctx))); r != Success {
		return c.l.err(c.name, "cuCtxPushCurrent_v2", r)
	}
	r := Result(int32(dl.Call(fn, args...)))
	var old uintptr
	dl.Call(c.l.ctxPop, uintptr(unsafe.Pointer(&old)))
	if r != Success {
		return c.l.err(c.name, op, r)
	}
	return nil
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

func (c *cudaDriver) query(e uintptr) (bool, error) {
	err := c.call("cuEventQuery", c.l.eventQuery, e)
	if e, ok := err.(*Error); ok && e.Result == NotReady {
		return false, nil
	}
	return err == nil, err
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

// kernelNames maps an output dtype to its entry point in kernels.PTX.
var kernelNames = map[pack.DType]string{
	pack.Float32:  kernels.F32,
	pack.Float16:  kernels.F16,
	pack.BFloat16: kernels.BF16,
}

func (c *cudaDriver) loadConverter() error {
	c.modMu.Lock()
	defer c.modMu.Unlock()
	if c.mod != 0 {
		return nil
	}
	ptx := append([]byte(kernels.PTX), 0)
	var mod uintptr
	if err := c.call("cuModuleLoadData", c.l.moduleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&ptx[0]))); err != nil {
		err.(*Error).Detail = "loading the conversion kernels from PTX"
		return err
	}
	fns := map[pack.DType]uintptr{}
	for dt, name := range kernelNames {
		cname := append([]byte(name), 0)
		var f uintptr
		if err := c.call("cuModuleGetFunction", c.l.moduleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
			c.call("cuModuleUnload", c.l.moduleUnload, mod)
			err.(*Error).Detail = name
			return err
		}
		fns[dt] = f
	}
	c.mod, c.fns = mod, fns
	return nil
}

// kernelArgs is the conversion kernels' parameter list, in order (see package kernels).
type kernelArgs struct {
	in, out       uint64
	pixels, plane uint64
	nchw, norm    uint32
	mean, std     [3]float32
}

// threadsPerBlock is the conversion's block size: one thread per pixel.
const threadsPerBlock = 256

func (c *cudaDriver) convert(k *launch, s uintptr) error {
	o := k.conv.o
	c.modMu.Lock()
	fn := c.fns[o.DType]
	c.modMu.Unlock()
	if fn == 0 {
		return fmt.Errorf("gpu: %s: no conversion kernel for %v", c.name, o.DType)
	}
	a := &kernelArgs{in: uint64(k.src), out: uint64(k.dst), pixels: uint64(k.pixels), plane: uint64(k.plane), mean: o.Mean, std: o.Std}
	if o.Layout == pack.NCHW {
		a.nchw = 1
	}
	if o.Normalize {
		a.norm = 1
	}
	// kernelParams: one pointer per parameter, to its value.
	params := &[12]unsafe.Pointer{
		unsafe.Pointer(&a.in), unsafe.Pointer(&a.out), unsafe.Pointer(&a.pixels), unsafe.Pointer(&a.plane),
		unsafe.Pointer(&a.nchw), unsafe.Pointer(&a.norm),
		unsafe.Pointer(&a.mean[0]), unsafe.Pointer(&a.mean[1]), unsafe.Pointer(&a.mean[2]),
		unsafe.Pointer(&a.std[0]), unsafe.Pointer(&a.std[1]), unsafe.Pointer(&a.std[2]),
	}
	blocks := (k.pixels + threadsPerBlock - 1) / threadsPerBlock
	if blocks > 1<<31-1 {
		return fmt.Errorf("gpu: %s: conversion of %d pixels exceeds one grid", c.name, k.pixels)
	}
	err := c.call("cuLaunchKernel", c.l.launchKernel, fn, uintptr(blocks), 1, 1, threadsPerBlock, 1, 1, 0, s,
		uintptr(unsafe.Pointer(&params[0])), 0)
	runtime.KeepAlive(a)
	runtime.KeepAlive(params)
	return err
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
