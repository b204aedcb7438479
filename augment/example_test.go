package augment_test

import (
	"encoding/binary"
	"fmt"
	"github.com/conveyor-ml/conveyor/pack"
	"math"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
)

// A training pipeline and a Packer, as the loader runs them for every sample: seed the
// Context from (seed, epoch, index), apply the ops, pack the result into the sample's
// slot of the batch.
func Example() {
	train := augment.Pipeline{
		augment.NewRandomResizedCrop(224, 224),
		augment.NewRandomHorizontalFlip(0.5),
	}
	packer, err := pack.NewPacker(&pack.Options{Width: 224, Height: 224, Normalize: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(train)
	fmt.Println(packer, packer.SampleBytes(), "bytes")

	// A decoded 500×375 image of one colour.
	var src decode.Image
	src.Reset(500, 375)
	for i := 0; i < len(src.Pix); i += 3 {
		src.Pix[i], src.Pix[i+1], src.Pix[i+2] = 124, 116, 104
	}

	c := augment.NewContext()                  // one per worker
	slot := make([]byte, packer.SampleBytes()) // in the loader: a slice of a pinned batch buffer
	c.Seed(42, 0, 7)
	out, err := train.Apply(c, &src)
	if err != nil {
		panic(err)
	}
	if err := packer.Pack(slot, out); err != nil {
		panic(err)
	}
	plane := 224 * 224 * 4 // NCHW: the red plane, then green, then blue
	for ch := range 3 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(slot[ch*plane:]))
		fmt.Printf("channel %d: %.5f\n", ch, v)
	}
	// Output:
	// [RandomResizedCrop(224x224, scale=(0.08, 1), ratio=(0.75, 1.333)), RandomHorizontalFlip(p=0.5)]
	// Packer(224x224 NCHW float32 normalize mean=[0.485 0.456 0.406] std=[0.229 0.224 0.225]) 602112 bytes
	// channel 0: 0.00557
	// channel 1: -0.00490
	// channel 2: 0.00819
}

// Params tells which part of the image a RandomResizedCrop will use, so that a loader
// can decode just enough of it.
func ExampleRandomResizedCrop_Params() {
	op := augment.NewRandomResizedCrop(224, 224)
	c := augment.NewContext()
	c.Seed(42, 0, 7)
	fmt.Println(op.Params(c.Rand, 2000, 50)) // far too wide: the centred fallback
	// Output:
	// (966,0)-(1033,50)
}

// Validate finds a bad parameter or a pipeline that cannot produce the packed size
// before any image is read.
func ExamplePipeline_Validate() {
	eval := augment.Pipeline{augment.NewResize(256), augment.NewCenterCrop(224, 224)}
	fmt.Println(eval.Validate(224, 224))
	fmt.Println(eval.Validate(256, 256))
	train := augment.Pipeline{
		augment.NewRandomResizedCrop(224, 224),
		augment.NewRandomHorizontalFlip(0.5),
		augment.NewColorJitter(0.4, 0.4, 0.4, 0.9),
	}
	fmt.Println(train.Validate(224, 224))
	// Output:
	// <nil>
	// augment: the ops end at 224x224 (CenterCrop(224x224)) but the batch packs 256x256
	// augment: op 2 ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.9): Hue 0.9 not in [0, 0.5]
}
