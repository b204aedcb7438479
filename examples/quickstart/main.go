// Command quickstart is README's Quick Start as a program: a loader over an ImageFolder
// tree with the "train" recipe, and a training loop that hands every batch to a step.
//
//	go run ./examples/quickstart             # on a generated set of coloured squares
//	go run ./examples/quickstart -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func main() {
	data := flag.String("data", "", "ImageFolder tree (default: generate one into a temporary directory)")
	epochs := flag.Int("epochs", 2, "epochs")
	flag.Parse()
	if err := run(*data, *epochs); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, epochs int) error {
	dir, cleanup, err := toy.DataDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	return train(context.Background(), dir, epochs)
}

// train is README's Quick Start.
func train(ctx context.Context, dir string, epochs int) error {
	src, err := source.Dir(dir, nil) // ImageFolder: class = first-level folder
	if err != nil {
		return err
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 256}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	// RandomResizedCrop(224) + RandomHorizontalFlip(0.5), packed 224×224
	if err := pipeline.ApplyRecipe(cfg, "train", 224); err != nil {
		return err
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return err
	}
	defer ld.Close()
	for epoch := range epochs {
		for b, err := range ld.Epoch(ctx, epoch) {
			if err != nil {
				return err // with OnError: pipeline.Fail, a *pipeline.SampleError names the bad file
			}
			step(b.Float32(), b.Labels) // [b.Len, 3, 224, 224] float32, normalised
			b.Release()                 // the buffer goes back to the pool
		}
	}
	return nil
}

// step stands in for a training step: it prints what it was given.
func step(x []float32, labels []int32) {
	fmt.Printf("step: %d images, %d float32 values, labels %v ...\n", len(labels), len(x), labels[:8])
}
