// Package gpu moves finished batches from pinned host memory into device memory: one
// interface, two backends.
//
//   - The host backend ("cpu") needs no GPU. "Device memory" is host memory: a ring
//     without conversion is zero-copy (a slot points at the host batch), and with
//     conversion the CPU converts into the ring's own buffers. Tests and CPU-only
//     training use it.
//   - The CUDA backend ("cuda:N") opens libcuda.so.1 at run time through purego (no cgo,
//     no CUDA toolkit, no build tag) and binds the versioned driver symbols itself
//     (cuMemAlloc_v2, cuMemcpyHtoDAsync_v2, cuMemHostRegister_v2, ...). It works in the
//     device's primary context, so its device pointers are valid for every other CUDA
//     user in the process (OpenContext uses a caller's context instead), pushing the
//     context onto the calling thread for each call and popping it after.
//
// A Ring is a fixed set of device buffers allocated once by NewRing; each Upload enqueues
// an asynchronous host-to-device copy on the ring's non-blocking stream and records an
// event, so the caller can tell (Ready), wait (Wait, which sleeps rather than spins) or
// make another stream wait (WaitOn) without the copy ever blocking the producer. With a
// Caster the ring copies uint8 NHWC pixels (a quarter of float32's bytes) and a kernel
// converts them on the device into float32, float16 or bfloat16, NCHW or NHWC, optionally
// normalised, bit for bit what pack.Packer writes on the host. The kernels are PTX
// text (package kernels) that the driver compiles for the GPU at hand.
//
// Every driver failure is an *Error with the driver function, the CUresult and its name;
// errors.Is matches it against a Result. A failed asynchronous copy is sticky on a GPU:
// it shows at the next Ready, Wait or Upload. Close frees all device memory, also after a
// failure; slots still held at Close are freed when released, and the device's context
// reference is dropped after the last of them.
//
// Register and Unregister page-lock host memory for the device (pinned.Options hooks).
//
// Like every package but pipeline, gpu starts no goroutines. Device, Ring and Slot are
// safe for concurrent use; a Slot has one owner from Acquire to Release.
package gpu
