package mixup_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
)

// Mixing a packed batch of two 1×2 uint8 samples with MixUp at λ = 0.75, and their
// smoothed one-hot targets over three classes.
func Example() {
	data := []byte{ // NHWC: sample 0 is black, sample 1 white
		0, 0, 0, 0, 0, 0,
		200, 200, 200, 200, 200, 200,
	}
	p := mixup.Params{Lambda: 0.75}
	if err := mixup.Pixels(data, 2, pack.NHWC, pack.Uint8, 1, 2, p); err != nil {
		panic(err)
	}
	off, on := mixup.SmoothValues(0.1, 3)
	targets := []float32{on, off, off, off, off, on} // labels 0 and 2
	if err := mixup.Targets(targets, 2, 3, p); err != nil {
		panic(err)
	}
	fmt.Println(data[:3], data[6:9])
	fmt.Printf("%.4f\n%.4f\n", targets[:3], targets[3:])

	// A loader draws each batch's parameters from a generator seeded per batch.
	o := mixup.Options{CutMix: 1}
	o.EnsureDefaults()
	cut := o.Draw(rand.New(rand.NewPCG(1, 2)), 224, 224)
	fmt.Println(cut.CutMix, cut.Lambda == 1-float64((cut.Y1-cut.Y0)*(cut.X1-cut.X0))/(224*224))
	// Output:
	// [50 50 50] [150 150 150]
	// [0.7083 0.0333 0.2583]
	// [0.2583 0.0333 0.7083]
	// true true
}
