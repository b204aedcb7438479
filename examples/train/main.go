// Command train trains a softmax classifier in pure Go on batches from a conveyor loader,
// and prints the loss falling epoch by epoch.
//
//	go run ./examples/train             # on a generated set of coloured squares
//	go run ./examples/train -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
//
// It is the smallest real training loop: for b, err := range ld.Epoch(ctx, e) { step;
// b.Release() }. examples/eval adds a validation set.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func main() {
	data := flag.String("data", "", "ImageFolder tree (default: generate one into a temporary directory)")
	epochs := flag.Int("epochs", 8, "epochs")
	size := flag.Int("size", 32, "input side in pixels")
	lr := flag.Float64("lr", 0.002, "learning rate")
	flag.Parse()
	if err := run(*data, *epochs, *size, float32(*lr)); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, epochs, size int, lr float32) error {
	dir, cleanup, err := toy.DataDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	src, err := pipeline.Dir(dir)
	if err != nil {
		return err
	}
	cfg := &pipeline.Config{
		BatchSize: 32, Seed: 1,
		Pack: pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	if err := pipeline.ApplyRecipe(cfg, "train", size); err != nil {
		return err
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return err
	}
	defer ld.Close()

	m := toy.NewSoftmax(3*size*size, len(src.Classes()))
	ctx := context.Background()
	for e := range epochs {
		var loss float64
		var correct, n int
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			l, c := m.Step(b.Float32(), b.Labels, lr)
			loss += l * float64(b.Len)
			correct += c
			n += b.Len
			b.Release()
		}
		fmt.Printf("epoch %d: loss %.4f  train accuracy %5.1f%%  (%d images)\n", e, loss/float64(n), 100*float64(correct)/float64(n), n)
	}
	return nil
}
