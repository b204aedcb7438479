package gpu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu/kernels"
	"github.com/conveyor-ml/conveyor/internal/dl"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/pack"
)

// libcudaEnv names the driver library to load instead of searching for it, for unusual
// installs (and for the tests' stand-in driver).
const libcudaEnv = "CONVEYOR_LIBCUDA"

// cuda holds the driver's entry points, bound once per process.
type cudaLib struct {
	name string // the library as found: a path, or the name the loader resolved
	jit  string // the PTX JIT compiler library loaded beside it, "" when none was found there

	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceTotalMem uintptr
	primaryCtxRetain, primaryCtxRelease, ctxPush, ctxPop                             uintptr
	memGetInfo, memAlloc, memFree, memHostRegister, memHostUnregister                uintptr
	streamCreate, streamDestroy, streamSynchronize, streamWaitEvent                  uintptr
	eventCreate, eventDestroy, eventRecord, eventQuery, eventSynchronize             uintptr
	memcpyHtoDAsync, memcpyHtoD, memcpyDtoH                                          uintptr
	moduleLoadDataEx, moduleGetFunction, moduleUnload, launchKernel                  uintptr
	getErrorName, getErrorString                                                     uintptr
}

// cudaLibs caches loadCUDA's result per $CONVEYOR_LIBCUDA value.
var (
	cudaMu   sync.Mutex
	cudaLibs = map[string]*cudaLoad{}
)

type cudaLoad struct {
	l   *cudaLib
	err error
}

// driverPlaces lists where loadCUDA looks for the driver, in order: the dynamic loader's
// search path first (ld.so.cache, LD_LIBRARY_PATH), then the folders NVIDIA's container
// runtime and the distributions install it in, which need not be on that path.
var driverPlaces = func() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libcuda.dylib"}
	}
	multiarch := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	places := []string{"libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}
	if multiarch != "" {
		places = append(places, "/usr/lib/"+multiarch+"/libcuda.so.1")
	}
	return append(places, "/usr/lib64/libcuda.so.1", "/usr/local/cuda/compat/libcuda.so.1")
}

// loadCUDA binds the driver and runs cuInit, once per process (per $CONVEYOR_LIBCUDA):
// $CONVEYOR_LIBCUDA alone when it is set (a wrong path fails rather than loading another
// driver), else the first of driverPlaces that loads and initialises. The error lists
// every place tried and why each failed.
func loadCUDA() (*cudaLib, error) {
	env := os.Getenv(libcudaEnv)
	cudaMu.Lock()
	defer cudaMu.Unlock()
	if c, ok := cudaLibs[env]; ok {
		return c.l, c.err
	}
	places := driverPlaces()
	if env != "" {
		places = []string{env}
	}
	var tried []string
	var l *cudaLib
	var err error
	for _, p := range places {
		if l, err = bindCUDA(p); err == nil {
			break
		}
		tried = append(tried, err.Error())
	}
	if l == nil {
		how := "tried"
		if env != "" {
			how = "$" + libcudaEnv + " is set; tried only it"
		}
		err = fmt.Errorf("cannot load the CUDA driver (is the NVIDIA driver installed? set $%s to its libcuda.so.1 if it is elsewhere); %s: %s",
			libcudaEnv, how, strings.Join(tried, "; "))
	}
	cudaLibs[env] = &cudaLoad{l, err}
	return l, err
}

// bindCUDA loads the driver at place, binds its entry points and runs cuInit. When place
// is a path it also loads the PTX JIT compiler beside it: the driver opens that library by
// name when it first compiles PTX, which fails when the folder is not on the loader's
// path, and a library already loaded is found by its name.
func bindCUDA(place string) (*cudaLib, error) {
	l := &cudaLib{name: place}
	if !dl.Supported {
		return nil, fmt.Errorf("%s: run-time loading is not supported on %s/%s", place, runtime.GOOS, runtime.GOARCH)
	}
	if strings.Contains(place, "/") {
		if _, err := os.Stat(place); err != nil {
			return nil, fmt.Errorf("%s: not there", place)
		}
	}
	if _, err := dl.Open(place); err != nil {
		return nil, err // the loader's message names the library
	}
	err := dl.Bind("gpu", place, map[string]*uintptr{
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
		"cuModuleLoadDataEx": &l.moduleLoadDataEx, "cuModuleGetFunction": &l.moduleGetFunction,
		"cuModuleUnload": &l.moduleUnload, "cuLaunchKernel": &l.launchKernel,
		"cuGetErrorName": &l.getErrorName, "cuGetErrorString": &l.getErrorString,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", place, err)
	}
	if dir, _ := filepath.Split(place); dir != "" {
		jit := filepath.Join(dir, "libnvidia-ptxjitcompiler.so.1")
		if _, err := os.Stat(jit); err == nil {
			if _, err := dl.Open(jit); err == nil {
				l.jit = jit
			}
		}
	}
	if r := Result(int32(dl.Call(l.init, 0))); r != Success {
		return nil, fmt.Errorf("%s: %w", place, l.err("", "cuInit", r))
	}
	return l, nil
}

// DriverInfo says which CUDA driver library this process uses.
type DriverInfo struct {
	Library string // where it was found: a path, or the name the loader resolved
	JIT     string // the PTX JIT compiler library loaded from the driver's folder, if any
	Version int    // cuDriverGetVersion: 13000 for CUDA 13.0
}

// Driver loads the CUDA driver as Open does and says which library it is; the error
// lists every place tried.
func Driver() (DriverInfo, error) {
	l, err := loadCUDA()
	if err != nil {
		return DriverInfo{}, fmt.Errorf("gpu: %w", err)
	}
	var v int32
	if r := Result(int32(dl.Call(l.driverGetVersion, uintptr(unsafe.Pointer(&v))))); r != Success {
		return DriverInfo{}, l.err("", "cuDriverGetVersion", r)
	}
	return DriverInfo{Library: l.name, JIT: l.jit, Version: int(v)}, nil
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

// kernelNames maps an output dtype to its entry point in kernels.PTX.
var kernelNames = map[pack.DType]string{
	pack.Float32:  kernels.F32,
	pack.Float16:  kernels.F16,
	pack.BFloat16: kernels.BF16,
}

// JIT options of cuModuleLoadDataEx (CUjit_option in cuda.h).
const (
	jitInfoLogBuffer      = 3
	jitInfoLogBufferSize  = 4
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
	jitLogVerbose         = 12
)

// jitLogBytes is the size of each JIT log buffer.
const jitLogBytes = 16 << 10

// loadModule compiles PTX text for the device with cuModuleLoadDataEx and returns the
// module and the JIT's info log; a failure's error carries the JIT's error log.
func (c *cudaDriver) loadModule(ptx string) (mod uintptr, info string, err error) {
	text := append([]byte(ptx), 0)
	infoLog, errLog := make([]byte, jitLogBytes), make([]byte, jitLogBytes)
	opts := []int32{jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogBufferSize, jitLogVerbose}
	// The logs' addresses travel inside vals, hidden from the compiler: pinning them keeps
	// them on the heap, in place, for the call (a stack buffer would move with its stack).
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&infoLog[0])
	pin.Pin(&errLog[0])
	vals := []uintptr{uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes, uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes, 1}
	err = c.call("cuModuleLoadDataEx", c.l.moduleLoadDataEx, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&text[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	info = logText(infoLog, vals[1])
	if err != nil {
		e := err.(*Error)
		e.Detail = "compiling the conversion kernels from PTX"
		if l := logText(errLog, vals[3]); l != "" {
			e.Detail += "; JIT log: " + l
		}
		return 0, info, e
	}
	return mod, info, nil
}

// logText is the text a JIT log buffer holds: up to its first NUL, within the bytes the
// driver says it wrote.
func logText(b []byte, n uintptr) string {
	if n < uintptr(len(b)) {
		b = b[:n]
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

func (c *cudaDriver) loadConverter() error {
	c.modMu.Lock()
	defer c.modMu.Unlock()
	if c.mod != 0 {
		return nil
	}
	mod, info, err := c.loadModule(kernels.PTX)
	if err != nil {
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
	c.mod, c.fns, c.jitLog = mod, fns, info
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
