package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
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
