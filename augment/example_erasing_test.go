package augment_test

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/pack"
)

// RandomErasing runs on the packed, normalised sample: Apply runs the image ops, the
// packer writes the slot, and ApplyTensor erases a rectangle of it with the same Context,
// as the loader does.
func ExampleRandomErasing() {
	ops := augment.Pipeline{
		&augment.RandomCrop{Width: 32, Height: 32, Padding: [4]int{4, 4, 4, 4}, PaddingMode: augment.PadReflect},
		augment.NewRandomHorizontalFlip(0.5),
		&augment.RandomErasing{P: 1, Value: [3]float32{-9, -9, -9}},
	}
	packer, err := pack.NewPacker(&pack.Options{Width: 32, Height: 32, Normalize: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(ops.Validate(32, 32))

	var src decode.Image
	src.Reset(32, 32)
	for i := range src.Pix {
		src.Pix[i] = 128
	}
	c := augment.NewContext()
	c.Seed(42, 0, 3)
	img, err := ops.Apply(c, &src) // stops before RandomErasing
	if err != nil {
		panic(err)
	}
	slot := make([]byte, packer.SampleBytes())
	if err := packer.Pack(slot, img); err != nil {
		panic(err)
	}
	s := packer.Sample(slot)
	if err := ops.ApplyTensor(c, s); err != nil {
		panic(err)
	}
	erased := 0
	for y := range 32 {
		for x := range 32 {
			if s.Value(0, x, y) == -9 {
				erased++
			}
		}
	}
	fmt.Printf("%d of 1024 pixels erased; a kept one is %.4f\n", erased, s.Value(0, 0, 0))
	// Output:
	// <nil>
	// 24 of 1024 pixels erased; a kept one is 0.0741
}

// Rotate and Affine are torchvision's F.rotate and F.affine on a PIL image.
func ExampleRotate() {
	var src decode.Image
	src.Reset(4, 2) // one red pixel top left
	src.Pix[0] = 255
	c := augment.NewContext()
	out := augment.Rotate(c, &src, 180, augment.Nearest, [3]uint8{})
	fmt.Println(out.Pix[3*7:]) // now bottom right
	out = augment.Affine(c, &src, 0, [2]float64{1, 1}, 1, [2]float64{}, augment.Nearest, [3]uint8{9, 9, 9})
	fmt.Println(out.Row(0), out.Row(1))
	// Output:
	// [255 0 0]
	// [9 9 9 9 9 9 9 9 9 9 9 9] [9 9 9 255 0 0 0 0 0 0 0 0]
}
