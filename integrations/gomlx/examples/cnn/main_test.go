package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-ml/conveyor/examples/toy"
)

// TestLossFalls trains the CNN for a few epochs on a tiny generated set (3 classes of
// coloured squares, 16 pixels) from each feed and checks that the training loss falls, and
// that the curve is written.
func TestLossFalls(t *testing.T) {
	dir := t.TempDir()
	if err := toy.WriteImageFolder(dir, 3, 12, 5); err != nil {
		t.Fatal(err)
	}
	for _, feed := range []string{"conveyor", "folder"} {
		t.Run(feed, func(t *testing.T) {
			o := options{data: dir, size: 16, batch: 8, epochs: 5, lr: 0.003, scale: 0.25, val: 0.25, seed: 1,
				feed: feed, task: "class", workers: 2, eval: feed == "conveyor"}
			res, err := run(o, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			// The first step's loss, before any update, against the last epoch's mean.
			first, last := res[0].StepLoss[0], res[len(res)-1].TrainLoss
			for _, r := range res {
				t.Logf("epoch %d: train loss %.3f (first step %.3f), validation accuracy %.2f", r.Epoch, r.TrainLoss, r.StepLoss[0], r.ValAcc)
			}
			if !(last < 0.5*first) {
				t.Fatalf("training loss %.4f in epoch %d, from %.4f at the first step: it did not halve", last, len(res)-1, first)
			}
			if o.eval {
				for _, r := range res {
					if !(r.ValAcc >= 0 && r.ValAcc <= 1) || !(r.ValLoss > 0) {
						t.Fatalf("epoch %d: validation accuracy %g, loss %g", r.Epoch, r.ValAcc, r.ValLoss)
					}
				}
				png := filepath.Join(t.TempDir(), "curve.png")
				if err := plotCurve(png, res, o); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(png); err != nil || fi.Size() < 1000 {
					t.Fatalf("curve: %v, %v", fi, err)
				}
			}
		})
	}
}

// TestOptionsRefused checks the flags run refuses.
func TestOptionsRefused(t *testing.T) {
	for _, o := range []options{
		{size: 20, batch: 8, epochs: 1, val: 0.25, feed: "conveyor", task: "class"},
		{size: 16, batch: 8, epochs: 1, val: 0.25, feed: "tf.data", task: "class"},
		{size: 16, batch: 8, epochs: 1, val: 0.25, feed: "conveyor", task: "colour"},
	} {
		if _, err := run(o, io.Discard); err == nil {
			t.Errorf("run accepted %+v", o)
		}
	}
}

// TestOrientationTask checks -task orientation: four rotations of every photograph, the
// split made by photograph (so 4× each side's photographs), four classes.
func TestOrientationTask(t *testing.T) {
	dir := t.TempDir()
	if err := toy.WriteImageFolder(dir, 2, 4, 9); err != nil {
		t.Fatal(err)
	}
	o := options{data: dir, size: 16, batch: 4, epochs: 1, lr: 0.003, scale: 0.25, val: 0.25, seed: 1,
		feed: "conveyor", task: "orientation", workers: 2, eval: true}
	res, err := run(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// 2 classes of 4 photographs: 3 of each for training, 1 for validation; 24 training
	// images in 6 batches of 4.
	if r := res[0]; r.Classes != 4 || r.Images != 24 || len(r.StepLoss) != 6 {
		t.Fatalf("%d classes, %d training images in %d steps; want 4, 24 in 6", r.Classes, r.Images, len(r.StepLoss))
	}
}
