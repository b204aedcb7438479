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
//	ctx := cu.NewContext(cu.Device(0), cu.SchedAuto)
//	dev, err := cuinterop.Open(ctx)
//	ld, err := pipeline.New(src, &pipeline.Config{GPU: dev, ...})
//	for b, err := range ld.Epoch(context.Background(), 0) {
//		ptr := cuinterop.DevicePtr(b) // a cu.DevicePtr, valid in ctx
//		...
//	}
package cuinterop
