package gpu

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu/kernels"
	"github.com/conveyor-ml/conveyor/pack"
)

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
