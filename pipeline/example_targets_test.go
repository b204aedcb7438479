package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Batches mixed with MixUp or CutMix (timm's switch) and smoothed: each carries soft
// targets, one row of NumClasses values per sample, and how it was mixed.
func ExampleConfig_mix() {
	dir := imageFolder(3, 4)
	defer os.RemoveAll(dir)
	src, err := source.Dir(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 6}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Float32, Normalize: true},
		Mix:  mixup.Options{MixUp: 0.8, CutMix: 1, Smoothing: 0.1},
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
		var sum float32
		for _, v := range b.Target(0) {
			sum += v
		}
		fmt.Printf("batch %d: %d targets of %d classes, row 0 sums to %.3f, mixed: %t\n",
			b.Number, len(b.Targets), b.NumClasses, sum, b.Mix.Lambda < 1)
		b.Release()
	}
	// Output:
	// batch 0: 18 targets of 3 classes, row 0 sums to 1.000, mixed: true
	// batch 1: 18 targets of 3 classes, row 0 sums to 1.000, mixed: true
}
