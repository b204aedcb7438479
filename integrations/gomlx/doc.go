// Package gomlx feeds GoMLX (github.com/gomlx/gomlx) training from a conveyor loader: a
// Dataset is a train.Dataset whose batches are conveyor's, so train.Loop, Trainer.Eval and
// batchnorm.UpdateAverages consume them as they consume GoMLX's own datasets.
//
//	ld, _ := gomlx.NewLoader(src, cfg)      // packs NHWC, the layout GoMLX's layers expect
//	ds, _ := gomlx.New(ctx, ld, &gomlx.Options{Backend: backend})
//	loop := train.NewLoop(trainer)
//	loop.RunEpochs(ds, 10)                  // Reset after each epoch starts the next one
//
// Each Yield takes the loader's next batch and returns one input, the images as a tensor of
// shape [N, H, W, 3] (NHWC, channels last: layers.Convolution and graph.MaxPool default
// to images.ChannelsLast) or [N, 3, H, W] for an NCHW loader, in the packed dtype (float32,
// float16, bfloat16 or uint8), and one label: class indices, int32 of shape [N, 1] as
// losses.SparseCategoricalCrossEntropyLogits and metrics.NewSparseCategoricalAccuracy take
// them, or, when the batches carry soft targets (Config.Mix, a multi-label source),
// float32 targets of shape [N, NumClasses] for losses.CategoricalCrossEntropyLogits.
//
// Memory: GoMLX v0.26 has no way to wrap memory it did not allocate in a tensor (every
// constructor, tensors.FromFlatDataAndDimensions and Backend.BufferFromFlatData included,
// copies), so the batch is copied once, and the conveyor batch is released right after,
// at the end of Yield: its pinned buffer goes back to the loader while the trainer runs
// the step. With Options.Backend the copy goes straight into a buffer of that backend (a
// shared buffer on simplego), which the trainer uses as is and frees when it finalizes the
// tensors after the step; without it the copy is a local tensor, which GoMLX copies once
// more into the backend at the step.
//
// Position and Options.Epoch/Cursor checkpoint and resume an epoch mid-way; errors are the
// loader's, unchanged (errors.Is and errors.As see pipeline.ErrClosed, *pipeline.SampleError
// and the rest), and the bad-sample policy is the loader's (Config.Bad.OnError, MaxBadFraction).
package gomlx
