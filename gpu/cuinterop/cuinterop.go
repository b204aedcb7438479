//go:build cuda

package cuinterop

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/conveyor-ml/conveyor/gpu"
)

// Open returns a gpu.Device that allocates and copies in ctx's CUDA context on ctx's
// device (cu.Device values are device ordinals). Close it after the loaders that use it,
// and before closing ctx.
func Open(ctx cu.Context) (*gpu.Device, error) {
	d, err := ctx.CurrentDevice()
	if err != nil {
		return nil, fmt.Errorf("cuinterop: %w", err)
	}
	return gpu.OpenContext(int(d), handle(ctx.CUDAContext()))
}

// handle is c's CUcontext: cu.CUContext is a struct holding just that pointer.
func handle(c cu.CUContext) uintptr {
	return *(*uintptr)(unsafe.Pointer(&c))
}

// Batch is a batch in device memory, such as a *pipeline.Batch: this package asks only
// for its address, so it depends on package gpu and not on the loader above it.
type Batch interface {
	DevicePtr() gpu.DevicePtr
}

// DevicePtr returns the batch's device memory as a cu.DevicePtr (0 when the loader did
// not pack the batch). Call b.Wait, or b.WaitOn a stream of the context, before reading it.
func DevicePtr(b Batch) cu.DevicePtr {
	return cu.DevicePtr(b.DevicePtr())
}

// Stream converts a cu.Stream to the CUstream handle Batch.WaitOn takes: cu.Stream is a
// struct holding just that pointer.
func Stream(s cu.Stream) uintptr {
	return *(*uintptr)(unsafe.Pointer(&s))
}
