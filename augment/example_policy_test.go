package augment_test

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
)

// The randaugment recipe's per-sample ops: a crop, a flip and RandAugment(2, 9) as
// torchvision builds them. The policy's draws come from the sample's Context, so the same
// (seed, epoch, index) gives the same image on any worker.
func ExampleRandAugment() {
	train := augment.Pipeline{
		augment.NewRandomResizedCrop(224, 224),
		augment.NewRandomHorizontalFlip(0.5),
		augment.NewRandAugment(2, 9),
	}
	fmt.Println(train)
	fmt.Println(train.Validate(224, 224))
	fmt.Println(augment.Pipeline{augment.NewRandAugment(2, 31)}.Validate(224, 224))

	var src decode.Image
	src.Reset(320, 240)
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 7 % 251)
	}
	a, b := augment.NewContext(), augment.NewContext()
	a.Seed(42, 3, 1000)
	b.Seed(42, 3, 1000)
	outA, _ := train.Apply(a, &src)
	sumA := policyChecksum(outA)
	outB, _ := train.Apply(b, &src)
	fmt.Println(outA.Width, outA.Height, sumA == policyChecksum(outB))
	// Output:
	// [RandomResizedCrop(224x224, scale=(0.08, 1), ratio=(0.75, 1.333)), RandomHorizontalFlip(p=0.5), RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill=[0 0 0])]
	// <nil>
	// augment: op 0 RandAugment(num_ops=2, magnitude=31, num_magnitude_bins=31, interpolation=nearest, fill=[0 0 0]): Magnitude 31 not in [0, 31)
	// 224 224 true
}

func policyChecksum(m *decode.Image) (s uint64) {
	for y := range m.Height {
		for _, v := range m.Row(y) {
			s = s*31 + uint64(v)
		}
	}
	return s
}
