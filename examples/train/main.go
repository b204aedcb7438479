// Command train trains a softmax classifier in pure Go on batches from a conveyor loader,
// and prints the loss falling epoch by epoch.
//
//	go run ./examples/train             # on a generated set of coloured squares
//	go run ./examples/train -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
//	go run ./examples/train -recipe randaugment -mixup 0.8 -cutmix 1 -smoothing 0.1 -micro 4
//
// It is the smallest real training loop: for b, err := range ld.Epoch(ctx, e) { step;
// b.Release() }. With -mixup, -cutmix or -smoothing the batches carry soft targets
// (Batch.Targets) and the step uses a soft-label cross-entropy; with -micro K each batch
// arrives as K micro-batches whose gradients accumulate until the last one
// (Batch.Micro == Batch.Micros-1), so the step is the whole batch's. examples/eval adds a
// validation set.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func main() {
	data := flag.String("data", "", "ImageFolder tree (default: generate one into a temporary directory)")
	epochs := flag.Int("epochs", 8, "epochs")
	size := flag.Int("size", 32, "input side in pixels")
	lr := flag.Float64("lr", 0.002, "learning rate")
	recipe := flag.String("recipe", "train", "augmentation recipe: train or randaugment")
	var mix mixup.Options
	flag.Float64Var(&mix.MixUp, "mixup", 0, "MixUp alpha (0: off)")
	flag.Float64Var(&mix.CutMix, "cutmix", 0, "CutMix alpha (0: off)")
	flag.Float64Var(&mix.Smoothing, "smoothing", 0, "label smoothing")
	micro := flag.Int("micro", 1, "micro-batches per batch (gradient accumulation)")
	flag.Parse()
	if err := run(*data, *recipe, mix, *micro, *epochs, *size, float32(*lr)); err != nil {
		log.Fatal(err)
	}
}

func run(dir, recipe string, mix mixup.Options, micro, epochs, size int, lr float32) error {
	dir, cleanup, err := toy.DataDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	src, err := source.Dir(dir, nil)
	if err != nil {
		return err
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 32, MicroBatches: micro}, Order: pipeline.OrderConfig{Seed: 1}, Mix: mix, Pack: pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	if err := pipeline.ApplyRecipe(cfg, recipe, size); err != nil {
		return err
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return err
	}
	defer ld.Close()

	classes := len(src.Classes())
	m := toy.NewSoftmax(3*size*size, classes)
	// Soft targets, or one-hot rows made from the labels, for the accumulating step.
	soft := mix.Dense() || micro > 1
	onehot := make([]float32, cfg.Batch.Size*classes)
	ctx := context.Background()
	for e := range epochs {
		var loss float64
		var correct, n int
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			if !soft {
				l, c := m.Step(b.Float32(), b.Labels, lr)
				loss += l * float64(b.Len)
				correct += c
			} else {
				targets := b.Targets
				if targets == nil {
					targets = onehot[:b.Len*classes]
					clear(targets)
					for i, y := range b.Labels {
						targets[i*classes+int(y)] = 1
					}
				}
				// Accuracy against the labels (with mixing, the dominant one's, roughly).
				correct += m.Correct(b.Float32(), b.Labels)
				loss += m.Accumulate(b.Float32(), targets) * float64(b.Len)
				if b.Micro == b.Micros-1 {
					m.Update(lr) // the last micro-batch: one step for the whole batch
				}
			}
			n += b.Len
			b.Release()
		}
		fmt.Printf("epoch %d: loss %.4f  train accuracy %5.1f%%  (%d images)\n", e, loss/float64(n), 100*float64(correct)/float64(n), n)
	}
	return nil
}
