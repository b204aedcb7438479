// Command quickstart is README's Getting Started: a loader over an ImageFolder tree with
// the "train" recipe, and a training loop that hands every batch to a step.
//
//	go run ./examples/quickstart             # on a generated set of coloured squares
//	go run ./examples/quickstart -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
)

func main() {
	data := flag.String("data", "", "ImageFolder tree DIR/CLASS/*.jpg (default: generate one into a temporary directory)")
	epochs := flag.Int("epochs", 2, "epochs")
	flag.Parse()
	if err := run(*data, *epochs); err != nil {
		log.Fatal(err)
	}
}

func run(data string, epochs int) error {
	dir, cleanup, err := toy.DataDir(data) // data, or a generated tree that cleanup removes
	if err != nil {
		return err
	}
	defer cleanup()
	return train(context.Background(), dir, epochs)
}

func train(ctx context.Context, dir string, epochs int) error {
	src, err := source.Dir(dir, nil) // ImageFolder: class = first-level folder, as torchvision's
	if err != nil {
		return err
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 256},
		Order: pipeline.OrderConfig{Seed: 1},
		Pack:  pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	// RandomResizedCrop(224) + RandomHorizontalFlip(0.5), packed 224×224
	if err := pipeline.ApplyRecipe(cfg, "train", 224); err != nil {
		return err
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return err // names the field or the op that is wrong
	}
	defer ld.Close()
	for epoch := range epochs {
		for b, err := range ld.Epoch(ctx, epoch) {
			if err != nil {
				return err // a *pipeline.SampleError names the file
			}
			step(b.Float32(), b.Labels) // [b.Len, 3, 224, 224] float32, normalised
			b.Release()                 // the buffer goes back to the pool
		}
		fmt.Printf("epoch %d done: %d images read so far\n", epoch, ld.Stats().Stages.Read.Items)
	}
	return nil
}

// step stands in for a training step.
func step(x []float32, labels []int32) {
	fmt.Printf("step: %d images, %d float32 values, labels %v ...\n", len(labels), len(x), labels[:min(8, len(labels))])
}
