// Command eval trains a softmax classifier on 80% of a dataset and reports its accuracy on
// the other 20% after every epoch: a training loader and a validation loader over a
// stratified split of one source.
//
//	go run ./examples/eval             # on a generated set of coloured squares
//	go run ./examples/eval -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
//
// The training loader uses the "train" recipe (random crops and flips, reshuffled every
// epoch); the validation loader uses "eval" (resize, centre crop, index order), so its
// accuracy changes only when the model does.
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
	epochs := flag.Int("epochs", 6, "epochs")
	size := flag.Int("size", 32, "input side in pixels")
	lr := flag.Float64("lr", 0.002, "learning rate")
	seed := flag.Uint64("seed", 1, "seed of the split, the order and the augmentation")
	flag.Parse()
	if err := run(*data, *epochs, *size, float32(*lr), *seed); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, epochs, size int, lr float32, seed uint64) error {
	dir, cleanup, err := toy.DataDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	src, err := source.Dir(dir, nil)
	if err != nil {
		return err
	}
	// 20% of every class for validation; the same seed gives the same split.
	trainSrc, valSrc, err := source.Split(src, 0.2, seed)
	if err != nil {
		return err
	}
	trainLd, err := newLoader(trainSrc, "train", size, seed)
	if err != nil {
		return err
	}
	defer trainLd.Close()
	valLd, err := newLoader(valSrc, "eval", size, seed)
	if err != nil {
		return err
	}
	defer valLd.Close()
	fmt.Printf("%d classes: %d training images, %d validation images\n", len(src.Classes()), trainSrc.Len(), valSrc.Len())

	m := toy.NewSoftmax(3*size*size, len(src.Classes()))
	ctx := context.Background()
	for e := range epochs {
		var loss float64
		var n int
		for b, err := range trainLd.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			l, _ := m.Step(b.Float32(), b.Labels, lr)
			loss += l * float64(b.Len)
			n += b.Len
			b.Release()
		}
		correct, total := 0, 0
		for b, err := range valLd.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			correct += m.Correct(b.Float32(), b.Labels)
			total += b.Len
			b.Release()
		}
		fmt.Printf("epoch %d: train loss %.4f  validation accuracy %5.1f%% (%d/%d)\n", e, loss/float64(n), 100*float64(correct)/float64(total), correct, total)
	}
	return nil
}

// newLoader returns a loader of src with the named recipe ("train" or "eval"; eval also
// sets Sequential) at size×size, packed as normalised float32 NCHW.
func newLoader(src pipeline.Source, recipe string, size int, seed uint64) (*pipeline.Loader, error) {
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 32}, Order: pipeline.OrderConfig{Seed: seed},
		Pack: pack.Options{DType: pack.Float32, Layout: pack.NCHW, Normalize: true},
	}
	if err := pipeline.ApplyRecipe(cfg, recipe, size); err != nil {
		return nil, err
	}
	return pipeline.New(src, cfg)
}
