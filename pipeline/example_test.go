package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"

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

	src, err := pipeline.Dir(dir)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &pipeline.Config{
		BatchSize: 8, Seed: 1,
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
