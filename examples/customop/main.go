// Command customop defines an augmentation op of its own, Cutout, runs it in a loader
// after the "train" recipe, and shows a bad parameter refused by pipeline.New before any
// image is read.
//
//	go run ./examples/customop             # on a generated set of coloured squares
//	go run ./examples/customop -data DIR   # on an ImageFolder tree DIR/CLASS/*.jpg
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Cutout blacks out a random Size×Size square of the image (clipped to it) with
// probability P, as in DeVries and Taylor, "Improved Regularization of Convolutional
// Neural Networks with Cutout" (2017).
//
// It implements augment.Op (Apply, String) and the optional augment.Validator and
// augment.Sizer, so that pipeline.New checks its parameters and the pipeline's output
// size before the first sample.
type Cutout struct {
	Size int     // side of the square, in pixels
	P    float64 // probability of cutting a square out
}

// Apply draws every random number from c.Rand, which the loader seeds from (seed, epoch,
// sample index): the same sample gets the same square whatever the number of workers.
// It works in place, on src.
func (o *Cutout) Apply(c *augment.Context, src *decode.Image) (*decode.Image, error) {
	if c.Rand.Float64() >= o.P {
		return src, nil
	}
	w, h := min(o.Size, src.Width), min(o.Size, src.Height)
	x := c.Rand.IntN(src.Width - w + 1)
	y := c.Rand.IntN(src.Height - h + 1)
	for row := y; row < y+h; row++ {
		clear(src.Row(row)[3*x : 3*(x+w)]) // RGB, 3 bytes a pixel
	}
	return src, nil
}

// String names the op and its parameters in logs and errors.
func (o *Cutout) String() string { return fmt.Sprintf("Cutout(size=%d, p=%g)", o.Size, o.P) }

// Validate reports parameters that would be wrong for every image. pipeline.New's error
// names the op (its position and String) before this message.
func (o *Cutout) Validate() error {
	if o.Size < 1 {
		return fmt.Errorf("Size %d must be ≥ 1", o.Size)
	}
	if !(o.P >= 0 && o.P <= 1) {
		return fmt.Errorf("P %g not in [0, 1]", o.P)
	}
	return nil
}

// OutputSize: Cutout keeps its input's size (0 when unknown stays 0).
func (o *Cutout) OutputSize(width, height int) (int, int) { return width, height }

func main() {
	data := flag.String("data", "", "ImageFolder tree (default: generate one into a temporary directory)")
	flag.Parse()
	if err := run(*data); err != nil {
		log.Fatal(err)
	}
}

func run(dir string) error {
	dir, cleanup, err := toy.DataDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	src, err := source.Dir(dir, nil)
	if err != nil {
		return err
	}
	// A probability given as a percentage: New refuses it before reading any image.
	bad, err := newLoader(src, &Cutout{Size: 12, P: 50})
	if err == nil {
		bad.Close()
		return errors.New("pipeline.New accepted Cutout{P: 50}")
	}
	fmt.Println("refused:", err)

	cutout := &Cutout{Size: 12, P: 0.5}
	ld, err := newLoader(src, cutout)
	if err != nil {
		return err
	}
	defer ld.Close()
	fmt.Println("augment:", ld.Config().Augment)

	// Count the samples with a row of 12 black pixels, the mark of a cutout: about half.
	// (The generated images have dark backgrounds, but almost never pure black.)
	black := make([]byte, 3*cutout.Size)
	for e := range 3 {
		cut, n := 0, 0
		for b, err := range ld.Epoch(context.Background(), e) {
			if err != nil {
				return err
			}
			sample := len(b.Data) / b.Len // 32×32×3 bytes, NHWC
			for i := range b.Len {
				if bytes.Contains(b.Data[i*sample:(i+1)*sample], black) {
					cut++
				}
			}
			n += b.Len
			b.Release()
		}
		fmt.Printf("epoch %d: %d of %d samples with a cutout\n", e, cut, n)
	}
	return nil
}

// newLoader returns a loader of src whose ops are the "train" recipe at 32×32 followed by
// cutout, packing uint8 pixels (NHWC) so that a cut-out square reads back as zeros.
func newLoader(src pipeline.Source, cutout *Cutout) (*pipeline.Loader, error) {
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 32}, Order: pipeline.OrderConfig{Seed: 1}, Pack: pack.Options{DType: pack.Uint8, Layout: pack.NHWC}}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		return nil, err
	}
	cfg.Augment = append(cfg.Augment, cutout) // after RandomResizedCrop and RandomHorizontalFlip
	return pipeline.New(src, cfg)
}
