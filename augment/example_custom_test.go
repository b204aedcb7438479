package augment_test

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
)

// Invert is a user-defined op: it inverts every value in place, with probability P.
type Invert struct{ P float64 }

func (o Invert) Apply(c *augment.Context, src *decode.Image) (*decode.Image, error) {
	// Draw from c.Rand only, so the sample stays a function of (seed, epoch, index).
	if c.Rand.Float64() >= o.P {
		return src, nil
	}
	for y := range src.Height {
		row := src.Row(y)
		for i, v := range row {
			row[i] = 255 - v
		}
	}
	return src, nil
}

func (o Invert) String() string { return fmt.Sprintf("Invert(p=%g)", o.P) }

// Any type with Apply and String is an Op and can join a Pipeline.
func Example_customOp() {
	p := augment.Pipeline{augment.NewCenterCrop(2, 1), Invert{P: 1}}
	src := decode.Image{Pix: []uint8{0, 0, 0, 10, 20, 30, 40, 50, 60, 255, 255, 255}, Width: 4, Height: 1, Stride: 12}
	out, err := p.Apply(augment.NewContext(), &src)
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	fmt.Println(out.Width, out.Height, out.Pix)
	// Output:
	// [CenterCrop(2x1), Invert(p=1)]
	// 2 1 [245 235 225 215 205 195]
}
