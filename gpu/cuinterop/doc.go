// Package cuinterop connects conveyor's loader to gorgonia.org/cu, for gorgonia users:
// the loader copies batches into the device memory of a caller's cu.Context, and hands
// them over as cu.DevicePtr.
//
// It needs cgo and the CUDA driver headers, so it is built only with the cuda build tag:
//
//	go build -tags cuda ./...
//
// Without the tag the package is empty. The rest of conveyor never needs the tag: package
// gpu opens libcuda.so.1 at run time.
//
// Build it against CUDA 12.x headers (cuda.h from a CUDA 12 toolkit, or an older one; cu looks
// in /usr/local/cuda/include, else set CGO_CFLAGS=-I...). CUDA 13 headers do not work:
// gorgonia.org/cu calls cuCtxCreate with 3 arguments, and CUDA 13's cuda.h maps cuCtxCreate to
// cuCtxCreate_v4, which takes 4 (cuMemAdvise, cuMemPrefetchAsync, cuGraphAddDependencies and
// cuGraphGetEdges changed too). At run time any driver at least as new as those headers
// require works, a CUDA 13 driver included: it still exports the _v2 symbols a CUDA 12 build
// links to. CI compile-checks this against CUDA 12 naming and checks that CUDA 13's cuCtxCreate
// still fails (.ci/cu-stub-header.sh, .ci/run).
//
//	ctx := cu.NewContext(cu.Device(0), cu.SchedAuto)
//	dev, err := cuinterop.Open(ctx)
//	ld, err := pipeline.New(src, &pipeline.Config{GPU: dev, ...})
//	for b, err := range ld.Epoch(context.Background(), 0) {
//		ptr := cuinterop.DevicePtr(b) // a cu.DevicePtr, valid in ctx
//		...
//	}
package cuinterop
