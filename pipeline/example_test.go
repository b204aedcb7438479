package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func Example() {
	dir, err := os.MkdirTemp("", "conveyor-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// An ImageFolder tree: dir/class00/*.jpg, dir/class01/*.jpg, ...
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 3, PerClass: 7, Seed: 1}); err != nil {
		log.Fatal(err)
	}

	src, err := source.Dir(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 8}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Float32, Normalize: true},
	}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		log.Fatal(err)
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ld.Close()

	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			log.Fatal(err)
		}
		x := b.Float32() // what a training step would consume
		fmt.Printf("batch %d: shape %v, %d floats, cursor %d\n", b.Number, b.Shape, len(x), b.Cursor)
		b.Release()
	}
	// Output:
	// batch 0: shape [8 3 32 32], 24576 floats, cursor 8
	// batch 1: shape [8 3 32 32], 24576 floats, cursor 16
	// batch 2: shape [5 3 32 32], 15360 floats, cursor 21
}

// imageFolder writes a small ImageFolder tree (dir/class00/*.jpg, dir/class01/*.jpg, ...)
// into a new temporary directory, for the examples below.
func imageFolder(classes, perClass int) string {
	dir, err := os.MkdirTemp("", "conveyor-example-")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: classes, PerClass: perClass, Seed: 1}); err != nil {
		log.Fatal(err)
	}
	return dir
}

// Gradient accumulation: each batch of 8 arrives as 4 micro-batches of 2, and the
// optimiser steps after the last. The pinned (and device) buffers hold 2 samples each.
func ExampleConfig_microBatches() {
	dir := imageFolder(3, 7) // 21 images: batches of 8, 8 and 5
	defer os.RemoveAll(dir)
	src, err := source.Dir(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 8, MicroBatches: 4}, Order: pipeline.OrderConfig{Seed: 1}, Pack: pack.Options{DType: pack.Float32}}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		log.Fatal(err)
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ld.Close()

	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			log.Fatal(err)
		}
		// The step's loss on this micro-batch, a mean over its samples, weighted so the
		// gradients accumulated over the batch are those of its mean loss.
		weight := float64(b.Len) / float64(b.BatchLen)
		fmt.Printf("batch %d micro %d/%d: %d samples, weight %.3f, cursor %d", b.Number, b.Micro, b.Micros, b.Len, weight, b.Cursor)
		if b.Micro == b.Micros-1 {
			fmt.Print(" → optimiser step")
		}
		fmt.Println()
		b.Release()
	}
	fmt.Printf("pinned: %d buffers of %d bytes\n", ld.Stats().Memory.Pinned.Buffers, ld.Stats().Memory.Pinned.BufferSize)
	// Output:
	// batch 0 micro 0/4: 2 samples, weight 0.250, cursor 2
	// batch 0 micro 1/4: 2 samples, weight 0.250, cursor 4
	// batch 0 micro 2/4: 2 samples, weight 0.250, cursor 6
	// batch 0 micro 3/4: 2 samples, weight 0.250, cursor 8 → optimiser step
	// batch 1 micro 0/4: 2 samples, weight 0.250, cursor 10
	// batch 1 micro 1/4: 2 samples, weight 0.250, cursor 12
	// batch 1 micro 2/4: 2 samples, weight 0.250, cursor 14
	// batch 1 micro 3/4: 2 samples, weight 0.250, cursor 16 → optimiser step
	// batch 2 micro 0/3: 2 samples, weight 0.400, cursor 18
	// batch 2 micro 1/3: 2 samples, weight 0.400, cursor 20
	// batch 2 micro 2/3: 1 samples, weight 0.200, cursor 21 → optimiser step
	// pinned: 3 buffers of 24576 bytes
}

// On a GPU the loader copies each batch into device memory while the training step uses
// the previous one. With Device "auto" the same code runs without a GPU: the batches
// stay in host memory and Stats.Device.Kind says so. (Here it runs on generated images, on
// whatever this machine has.)
func Example_cuda() {
	ctx := context.Background()
	dir := imageFolder(3, 7) // 21 images
	defer os.RemoveAll(dir)
	src, err := source.Dir(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 8}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		log.Fatal(err)
	}

	cfg.Device.Name = "auto" // cuda:0 if usable, else cpu with one log line; or "cuda:0"
	cfg.Device.Cast = true   // optional: copy uint8, convert to float32 NCHW normalised on the GPU
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		log.Fatal(err) // says what is missing when the driver or the GPU is not usable
	}
	defer ld.Close()
	onGPU := ld.Stats().Device.Kind == gpu.CUDA
	var stepStream uintptr // the training step's CUDA stream (a CUstream; 0: the default stream)
	samples := 0
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			log.Fatal(err) // a failed copy or a lost device names the batch
		}
		if onGPU {
			// The step's stream waits for the copy; the CPU does not.
			if err := b.WaitOn(stepStream); err != nil {
				log.Fatal(err)
			}
			deviceStep(stepStream, b.DevicePtr(), b.Shape, b.Labels) // b.DType, b.Layout describe the device tensor
		} else {
			hostStep(b.Float32(), b.Shape, b.Labels) // the same batch, in host memory
		}
		samples += b.Len
		// Recycles the host and the device buffer. The CPU does not wait for the step:
		// the buffer is written again only after the work enqueued on stepStream so far.
		b.Release()
	}
	fmt.Printf("%d samples\n", samples)
	// Output:
	// 21 samples
}

// deviceStep stands in for a training step that reads the batch from device memory on
// stream.
func deviceStep(stream uintptr, ptr gpu.DevicePtr, shape [4]int, labels []int32) {}

// hostStep stands in for a training step that reads the batch from host memory.
func hostStep(x []float32, shape [4]int, labels []int32) {
	if len(x) != shape[0]*shape[1]*shape[2]*shape[3] {
		log.Fatalf("%d floats for shape %v", len(x), shape)
	}
}

// With Config.SampleCache set, epoch 0 decodes and stores every sample (SampleCacheFill 1 stores
// them at once), and later epochs read them from the cache instead of decoding.
func ExampleConfig_cache() {
	ctx := context.Background()
	tree := imageFolder(3, 7)
	defer os.RemoveAll(tree)
	cacheDir, err := os.MkdirTemp("", "conveyor-cache-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cacheDir)
	src, err := source.Dir(tree, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 8}, Order: pipeline.OrderConfig{Seed: 1}, SampleCacheFill: 1, Pack: pack.Options{DType: pack.Float32, Normalize: true}}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		log.Fatal(err)
	}

	c, err := cache.Open(cacheDir, &cache.Options{MaxBytes: 20 << 30}) // at most 20 GiB on disk
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cfg.SampleCache = c

	ld, err := pipeline.New(src, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ld.Close()
	for epoch := range 2 {
		for b, err := range ld.Epoch(ctx, epoch) {
			if err != nil {
				log.Fatal(err)
			}
			b.Release()
		}
		st := ld.Stats()
		fmt.Printf("after epoch %d: %d samples stored, %d read from the cache\n", epoch, st.Cache.Stored, st.Cache.Hits)
	}
	// Output:
	// after epoch 0: 21 samples stored, 0 read from the cache
	// after epoch 1: 21 samples stored, 21 read from the cache
}
