// Command cnn trains a small convolutional network with GoMLX's trainer on the pure-Go
// simplego backend, fed by conveyor through integrations/gomlx, on an ImageFolder tree
// split into training and validation sets; it prints the loss and validation accuracy per
// epoch and can draw them as a PNG.
//
//	go run ./examples/cnn -data /tmp/gomlx-photos -png curve.png
//	go run ./examples/cnn                            # a generated set of coloured squares
//	go run ./examples/cnn -feed folder -eval=false   # fed by image.Decode + datasets.Parallel
//
// See README.md for the figures and what they mean.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/integrations/gomlx"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers/batchnorm"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/metrics"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// options are the command's flags.
type options struct {
	data    string  // ImageFolder tree; empty: generate the toy set
	size    int     // input side in pixels
	batch   int     // training batch size
	epochs  int     // training epochs
	lr      float64 // Adam's learning rate
	scale   float64 // RandomResizedCrop's smallest crop, a fraction of the image's area
	val     float64 // validation fraction of every class
	seed    uint64  // split, order, augmentation and initialisation
	feed    string  // "conveyor" or "folder"
	task    string  // "class" (the tree's classes) or "orientation" (rotations of its photos)
	workers int     // decoding goroutines; 0: the feed's default
	eval    bool    // evaluate on the validation set after every epoch
	png     string  // write the curve here
}

// epochResult is one epoch's figures.
type epochResult struct {
	Epoch     int
	Classes   int
	TrainLoss float64   // mean over the epoch's steps
	StepLoss  []float64 // each step's loss
	ValLoss   float64   // after the epoch; NaN without eval
	ValAcc    float64   // fraction of validation images right; NaN without eval
	Images    int       // training images in the epoch
	Seconds   float64   // the training epoch's wall time (RunEpochs), evaluation excluded
	Wait      float64   // seconds of it the trainer spent in the dataset's Yield
}

func main() {
	var o options
	flag.StringVar(&o.data, "data", "", "ImageFolder tree DIR/CLASS/*.jpg (default: generate a set of coloured squares)")
	flag.IntVar(&o.size, "size", 32, "input side in pixels, a multiple of 8")
	flag.IntVar(&o.batch, "batch", 8, "training batch size")
	flag.IntVar(&o.epochs, "epochs", 10, "epochs")
	flag.Float64Var(&o.lr, "lr", 0.003, "Adam learning rate")
	flag.Float64Var(&o.scale, "scale", 0.25, "smallest random crop, as a fraction of the image's area (torchvision's default is 0.08)")
	flag.Float64Var(&o.val, "val", 0.25, "validation fraction of every class")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the split, order, augmentations and initialisation")
	flag.StringVar(&o.feed, "feed", "conveyor", "what feeds training: conveyor, or folder (image.Decode + imaging + datasets.Parallel, as GoMLX's examples load images)")
	flag.StringVar(&o.task, "task", "class", "what to predict: class, the tree's classes, or orientation, the rotation (0, 90, 180, 270) of each photograph, split by photograph")
	flag.IntVar(&o.workers, "workers", 0, "decoding goroutines (default: conveyor's autotuning; GoMLX's cores+1 for folder)")
	flag.BoolVar(&o.eval, "eval", true, "evaluate on the validation set after every epoch")
	flag.StringVar(&o.png, "png", "", "write the loss and accuracy curve to this PNG")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file (go tool pprof FILE)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	res, err := run(o, os.Stdout)
	if err == nil && o.png != "" {
		err = plotCurve(o.png, res, o)
	}
	if err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
}

// run trains and returns the figures of every epoch, printing them to w.
func run(o options, w io.Writer) ([]epochResult, error) {
	if o.size < 8 || o.size%(1<<len(channels)) != 0 {
		return nil, fmt.Errorf("cnn: -size %d: want a multiple of %d (each block halves it)", o.size, 1<<len(channels))
	}
	if o.feed != "conveyor" && o.feed != "folder" {
		return nil, fmt.Errorf("cnn: -feed %q: want conveyor or folder", o.feed)
	}
	if o.task != "class" && o.task != "orientation" {
		return nil, fmt.Errorf("cnn: -task %q: want class or orientation", o.task)
	}
	dir, cleanup, err := toy.DataDir(o.data)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	src, err := source.Dir(dir, nil)
	if err != nil {
		return nil, err
	}
	classes := len(src.Classes())
	trainSrc, valSrc, err := source.Split(src, o.val, o.seed)
	if err != nil {
		return nil, err
	}
	// With -task orientation the split above is of photographs (stratified by the tree's
	// classes), and each side becomes a tree of its photographs' rotations: no photograph
	// is on both sides. Rotations make horizontal flips change the label, so none is drawn.
	flip := true
	if o.task == "orientation" {
		tmp, err := os.MkdirTemp("", "conveyor-cnn-orientation")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		var srcs [2]pipeline.Source
		for i, s := range []pipeline.Source{trainSrc, valSrc} {
			d := filepath.Join(tmp, []string{"train", "val"}[i])
			if err := orientationTree(s, dir, d, 2*o.size); err != nil {
				return nil, err
			}
			if srcs[i], err = source.Dir(d, nil); err != nil {
				return nil, err
			}
		}
		trainSrc, valSrc, dir, classes, flip = srcs[0], srcs[1], filepath.Join(tmp, "train"), len(orientations), false
	}
	if trainSrc.Len() < o.batch {
		return nil, fmt.Errorf("cnn: %d training images, fewer than a batch of %d", trainSrc.Len(), o.batch)
	}
	be, err := simplego.New("")
	if err != nil {
		return nil, err
	}
	defer be.Finalize()
	ctx := context.Background()

	// Training batches: the train recipe (RandomResizedCrop of at least -scale, flip), x/255 in NHWC float32,
	// whole batches only, so the trainer compiles one graph.
	trainCfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: o.batch, DropLast: true}, Order: pipeline.OrderConfig{Seed: o.seed}, Tuning: pipeline.TuningConfig{Workers: o.workers},
		Pack: pack.Options{DType: pack.Float32}}
	if err := pipeline.ApplyRecipe(trainCfg, "train", o.size); err != nil {
		return nil, err
	}
	trainCfg.Augment[0].(*augment.RandomResizedCrop).Scale = [2]float64{o.scale, 1}
	if !flip {
		trainCfg.Augment = trainCfg.Augment[:1]
	}
	trainLd, err := gomlx.NewLoader(trainSrc, trainCfg)
	if err != nil {
		return nil, err
	}
	defer trainLd.Close()
	var trainDS train.Dataset
	if o.feed == "conveyor" {
		ds, err := gomlx.New(ctx, trainLd, &gomlx.Options{Name: "train", Backend: be})
		if err != nil {
			return nil, err
		}
		defer ds.Close()
		trainDS = ds
	} else {
		paths, labels := listFolder(trainSrc, dir)
		pds := newFolder(paths, labels, o.size, o.batch, o.scale, flip, o.seed, o.workers)
		defer pds.Done() // its goroutines are already decoding the next epoch
		trainDS = pds
	}
	timed := &timedDataset{Dataset: trainDS}

	// Evaluation: the eval recipe (resize, centre crop), in index order; the validation set
	// in one batch, and the training set again to recompute batch norm's averages.
	evalDS := func(s pipeline.Source, name string, batch int) (*gomlx.Dataset, func(), error) {
		cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: batch}, Order: pipeline.OrderConfig{Seed: o.seed}, Pack: pack.Options{DType: pack.Float32}}
		if err := pipeline.ApplyRecipe(cfg, "eval", o.size); err != nil {
			return nil, nil, err
		}
		ld, err := gomlx.NewLoader(s, cfg)
		if err != nil {
			return nil, nil, err
		}
		ds, err := gomlx.New(ctx, ld, &gomlx.Options{Name: name, Backend: be})
		if err != nil {
			ld.Close()
			return nil, nil, err
		}
		return ds, func() { ds.Close(); ld.Close() }, nil
	}
	var valDS, statsDS *gomlx.Dataset
	if o.eval {
		var done func()
		if valDS, done, err = evalDS(valSrc, "validation", min(valSrc.Len(), 64)); err != nil {
			return nil, err
		}
		defer done()
		if statsDS, done, err = evalDS(trainSrc, "train-eval", min(trainSrc.Len(), 64)); err != nil {
			return nil, err
		}
		defer done()
	}

	mctx := mlctx.New()
	if err := mctx.SetRNGStateFromSeed(int64(o.seed)); err != nil {
		return nil, err
	}
	trainer := train.NewTrainer(be, mctx, cnn(classes), losses.SparseCategoricalCrossEntropyLogits,
		optimizers.Adam().LearningRate(o.lr).Done(),
		nil, []metrics.Interface{metrics.NewSparseCategoricalAccuracy("accuracy", "acc")})
	loop := train.NewLoop(trainer)
	var stepLoss []float64
	loop.OnStep("loss", train.Priority(0), func(_ *train.Loop, m []*tensors.Tensor) error {
		stepLoss = append(stepLoss, float64(tensors.ToScalar[float32](m[0])))
		return nil
	})

	fmt.Fprintf(w, "task %s, %d classes: %d training, %d validation images; %dx%d NHWC float32, batch %d; feed %s (decoder %s); backend %s\n",
		o.task, classes, trainSrc.Len(), valSrc.Len(), o.size, o.size, o.batch, o.feed, trainLd.Stats().Backends.Decode, be.Name())
	var res []epochResult
	for e := range o.epochs {
		stepLoss, timed.wait = nil, 0
		t0 := time.Now()
		if _, err := loop.RunEpochs(timed, 1); err != nil {
			return nil, err
		}
		var sum float64
		for _, l := range stepLoss {
			sum += l
		}
		r := epochResult{Epoch: e, Classes: classes, TrainLoss: sum / float64(len(stepLoss)), StepLoss: stepLoss,
			ValLoss: math.NaN(), ValAcc: math.NaN(), Images: len(stepLoss) * o.batch, Seconds: time.Since(t0).Seconds(), Wait: timed.wait.Seconds()}
		if o.eval {
			if _, err := batchnorm.UpdateAverages(trainer, statsDS); err != nil {
				return nil, err
			}
			m, err := trainer.Eval(valDS)
			if err != nil {
				return nil, err
			}
			// Eval's metrics: mean loss with regularisation, mean loss, then ours.
			for i, mi := range trainer.EvalMetrics() {
				switch mi.ShortName() {
				case "#loss":
					r.ValLoss = float64(tensors.ToScalar[float32](m[i]))
				case "acc":
					r.ValAcc = float64(tensors.ToScalar[float32](m[i]))
				}
			}
			for _, t := range m {
				t.MustFinalizeAll()
			}
		}
		res = append(res, r)
		fmt.Fprintf(w, "epoch %2d: train loss %.4f  val loss %.4f  val accuracy %5.1f%%  %6.1f images/s  waiting for data %4.1f%%\n",
			e, r.TrainLoss, r.ValLoss, 100*r.ValAcc, float64(r.Images)/r.Seconds, 100*r.Wait/r.Seconds)
	}
	if len(res) > 1 {
		// The first epoch compiles the graph; the rest are the steady state.
		var imgs int
		var secs, wait float64
		for _, r := range res[1:] {
			imgs += r.Images
			secs += r.Seconds
			wait += r.Wait
		}
		fmt.Fprintf(w, "epochs 1-%d: %.1f images/s, %.1f%% of the time waiting for data (feed %s)\n",
			len(res)-1, float64(imgs)/secs, 100*wait/secs, o.feed)
	}
	return res, nil
}

// timedDataset measures the time the trainer spends waiting in Yield.
type timedDataset struct {
	train.Dataset
	wait time.Duration
}

func (t *timedDataset) Yield() (spec any, inputs, labels []*tensors.Tensor, err error) {
	t0 := time.Now()
	spec, inputs, labels, err = t.Dataset.Yield()
	t.wait += time.Since(t0)
	return
}

// IsOwnershipTransferred: both feeds hand their tensors to the trainer.
func (t *timedDataset) IsOwnershipTransferred() bool { return true }
