// Command train trains a softmax (multinomial logistic regression) classifier in pure Go
// on batches from a conveyor loader, and prints the loss falling epoch by epoch.
//
//	go run ./examples/train            # on a generated synthetic set
//	go run ./examples/train -dir DIR   # on an ImageFolder tree
//
// It is the smallest real training loop: for b, err := range loader.Epoch(ctx, e) { step;
// b.Release() }. The synthetic classes differ in palette and gradient direction, which a
// linear model on 32×32 pixels can learn.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func main() {
	dir := flag.String("dir", "", "ImageFolder tree (default: generate a synthetic one)")
	epochs := flag.Int("epochs", 8, "epochs")
	size := flag.Int("size", 32, "input side in pixels")
	lr := flag.Float64("lr", 0.002, "learning rate")
	flag.Parse()
	if err := run(*dir, *epochs, *size, float32(*lr)); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, epochs, size int, lr float32) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "conveyor-train-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if _, err := synth.WriteTree(tmp, &synth.TreeOptions{Classes: 10, PerClass: 40, Seed: 1, MinSide: 64, MaxSide: 160}); err != nil {
			return err
		}
		dir = tmp
	}
	src, err := pipeline.Dir(dir)
	if err != nil {
		return err
	}
	classes := len(src.Classes())
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

	m := newModel(3*size*size, classes)
	ctx := context.Background()
	for e := range epochs {
		var loss float64
		var correct, n int
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			l, c := m.step(b.Float32(), b.Labels, lr)
			loss += l * float64(b.Len)
			correct += c
			n += b.Len
			b.Release()
		}
		fmt.Printf("epoch %d: loss %.4f  train accuracy %.1f%%  (%d images)\n", e, loss/float64(n), 100*float64(correct)/float64(n), n)
	}
	return nil
}

// model is a linear layer followed by softmax, trained with plain SGD on cross-entropy.
type model struct {
	in, out int
	w       []float32 // out×in
	bias    []float32
	logits  []float32
	grad    []float32
}

func newModel(in, out int) *model {
	return &model{in: in, out: out, w: make([]float32, in*out), bias: make([]float32, out),
		logits: make([]float32, out), grad: make([]float32, out)}
}

// step trains on one batch and returns its mean loss and the number classified correctly.
func (m *model) step(x []float32, labels []int32, lr float32) (float64, int) {
	var loss float64
	correct := 0
	scale := lr / float32(len(labels))
	for i, y := range labels {
		xi := x[i*m.in : (i+1)*m.in]
		best := 0
		for k := range m.out {
			m.logits[k] = m.bias[k] + dot(m.w[k*m.in:(k+1)*m.in], xi)
			if m.logits[k] > m.logits[best] {
				best = k
			}
		}
		if best == int(y) {
			correct++
		}
		// Softmax with the max subtracted, then the cross-entropy gradient p - onehot(y).
		var sum float64
		for k := range m.out {
			sum += math.Exp(float64(m.logits[k] - m.logits[best]))
		}
		for k := range m.out {
			p := float32(math.Exp(float64(m.logits[k]-m.logits[best])) / sum)
			if k == int(y) {
				loss -= math.Log(max(float64(p), 1e-12))
				p--
			}
			m.grad[k] = p
		}
		for k := range m.out {
			g := scale * m.grad[k]
			axpy(m.w[k*m.in:(k+1)*m.in], xi, -g)
			m.bias[k] -= g
		}
	}
	return loss / float64(len(labels)), correct
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(dst, x []float32, a float32) {
	for i := range dst {
		dst[i] += a * x[i]
	}
}
