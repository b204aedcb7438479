package augment

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/decode"
)

// AutoAugmentPolicy selects the learned policy of AutoAugment.
type AutoAugmentPolicy int

const (
	// ImageNetPolicy is the policy learned on ImageNet, torchvision's default.
	ImageNetPolicy AutoAugmentPolicy = iota
	// CIFAR10Policy is the policy learned on CIFAR-10.
	CIFAR10Policy
	// SVHNPolicy is the policy learned on SVHN.
	SVHNPolicy
)

func (p AutoAugmentPolicy) String() string {
	switch p {
	case ImageNetPolicy:
		return "imagenet"
	case CIFAR10Policy:
		return "cifar10"
	case SVHNPolicy:
		return "svhn"
	}
	return fmt.Sprintf("AutoAugmentPolicy(%d)", int(p))
}

// subPolicy is one of AutoAugment's 25 pairs: each op with its probability and magnitude
// bin (of 10; -1 for ops without one).
type subPolicy [2]struct {
	op  augOp
	p   float64
	bin int8
}

// autoAugmentPolicies are torchvision's _get_policies, in its order.
var autoAugmentPolicies = [...][25]subPolicy{
	ImageNetPolicy: {
		{{opPosterize, 0.4, 8}, {opRotate, 0.6, 9}},
		{{opSolarize, 0.6, 5}, {opAutoContrast, 0.6, -1}},
		{{opEqualize, 0.8, -1}, {opEqualize, 0.6, -1}},
		{{opPosterize, 0.6, 7}, {opPosterize, 0.6, 6}},
		{{opEqualize, 0.4, -1}, {opSolarize, 0.2, 4}},
		{{opEqualize, 0.4, -1}, {opRotate, 0.8, 8}},
		{{opSolarize, 0.6, 3}, {opEqualize, 0.6, -1}},
		{{opPosterize, 0.8, 5}, {opEqualize, 1.0, -1}},
		{{opRotate, 0.2, 3}, {opSolarize, 0.6, 8}},
		{{opEqualize, 0.6, -1}, {opPosterize, 0.4, 6}},
		{{opRotate, 0.8, 8}, {opColor, 0.4, 0}},
		{{opRotate, 0.4, 9}, {opEqualize, 0.6, -1}},
		{{opEqualize, 0.0, -1}, {opEqualize, 0.8, -1}},
		{{opInvert, 0.6, -1}, {opEqualize, 1.0, -1}},
		{{opColor, 0.6, 4}, {opContrast, 1.0, 8}},
		{{opRotate, 0.8, 8}, {opColor, 1.0, 2}},
		{{opColor, 0.8, 8}, {opSolarize, 0.8, 7}},
		{{opSharpness, 0.4, 7}, {opInvert, 0.6, -1}},
		{{opShearX, 0.6, 5}, {opEqualize, 1.0, -1}},
		{{opColor, 0.4, 0}, {opEqualize, 0.6, -1}},
		{{opEqualize, 0.4, -1}, {opSolarize, 0.2, 4}},
		{{opSolarize, 0.6, 5}, {opAutoContrast, 0.6, -1}},
		{{opInvert, 0.6, -1}, {opEqualize, 1.0, -1}},
		{{opColor, 0.6, 4}, {opContrast, 1.0, 8}},
		{{opEqualize, 0.8, -1}, {opEqualize, 0.6, -1}},
	},
	CIFAR10Policy: {
		{{opInvert, 0.1, -1}, {opContrast, 0.2, 6}},
		{{opRotate, 0.7, 2}, {opTranslateX, 0.3, 9}},
		{{opSharpness, 0.8, 1}, {opSharpness, 0.9, 3}},
		{{opShearY, 0.5, 8}, {opTranslateY, 0.7, 9}},
		{{opAutoContrast, 0.5, -1}, {opEqualize, 0.9, -1}},
		{{opShearY, 0.2, 7}, {opPosterize, 0.3, 7}},
		{{opColor, 0.4, 3}, {opBrightness, 0.6, 7}},
		{{opSharpness, 0.3, 9}, {opBrightness, 0.7, 9}},
		{{opEqualize, 0.6, -1}, {opEqualize, 0.5, -1}},
		{{opContrast, 0.6, 7}, {opSharpness, 0.6, 5}},
		{{opColor, 0.7, 7}, {opTranslateX, 0.5, 8}},
		{{opEqualize, 0.3, -1}, {opAutoContrast, 0.4, -1}},
		{{opTranslateY, 0.4, 3}, {opSharpness, 0.2, 6}},
		{{opBrightness, 0.9, 6}, {opColor, 0.2, 8}},
		{{opSolarize, 0.5, 2}, {opInvert, 0.0, -1}},
		{{opEqualize, 0.2, -1}, {opAutoContrast, 0.6, -1}},
		{{opEqualize, 0.2, -1}, {opEqualize, 0.6, -1}},
		{{opColor, 0.9, 9}, {opEqualize, 0.6, -1}},
		{{opAutoContrast, 0.8, -1}, {opSolarize, 0.2, 8}},
		{{opBrightness, 0.1, 3}, {opColor, 0.7, 0}},
		{{opSolarize, 0.4, 5}, {opAutoContrast, 0.9, -1}},
		{{opTranslateY, 0.9, 9}, {opTranslateY, 0.7, 9}},
		{{opAutoContrast, 0.9, -1}, {opSolarize, 0.8, 3}},
		{{opEqualize, 0.8, -1}, {opInvert, 0.1, -1}},
		{{opTranslateY, 0.7, 9}, {opAutoContrast, 0.9, -1}},
	},
	SVHNPolicy: {
		{{opShearX, 0.9, 4}, {opInvert, 0.2, -1}},
		{{opShearY, 0.9, 8}, {opInvert, 0.7, -1}},
		{{opEqualize, 0.6, -1}, {opSolarize, 0.6, 6}},
		{{opInvert, 0.9, -1}, {opEqualize, 0.6, -1}},
		{{opEqualize, 0.6, -1}, {opRotate, 0.9, 3}},
		{{opShearX, 0.9, 4}, {opAutoContrast, 0.8, -1}},
		{{opShearY, 0.9, 8}, {opInvert, 0.4, -1}},
		{{opShearY, 0.9, 5}, {opSolarize, 0.2, 6}},
		{{opInvert, 0.9, -1}, {opAutoContrast, 0.8, -1}},
		{{opEqualize, 0.6, -1}, {opRotate, 0.9, 3}},
		{{opShearX, 0.9, 4}, {opSolarize, 0.3, 3}},
		{{opShearY, 0.8, 8}, {opInvert, 0.7, -1}},
		{{opEqualize, 0.9, -1}, {opTranslateY, 0.6, 6}},
		{{opInvert, 0.9, -1}, {opEqualize, 0.6, -1}},
		{{opContrast, 0.3, 3}, {opRotate, 0.8, 4}},
		{{opInvert, 0.8, -1}, {opTranslateY, 0.0, 2}},
		{{opShearY, 0.7, 6}, {opSolarize, 0.4, 8}},
		{{opInvert, 0.6, -1}, {opRotate, 0.8, 4}},
		{{opShearY, 0.3, 7}, {opTranslateX, 0.9, 3}},
		{{opShearX, 0.1, 6}, {opInvert, 0.6, -1}},
		{{opSolarize, 0.7, 2}, {opTranslateY, 0.6, 7}},
		{{opShearY, 0.8, 4}, {opInvert, 0.8, -1}},
		{{opShearX, 0.7, 9}, {opTranslateY, 0.8, 3}},
		{{opShearY, 0.8, 5}, {opAutoContrast, 0.7, -1}},
		{{opShearX, 0.7, 2}, {opInvert, 0.1, -1}},
	},
}

// AutoAugment applies one of a learned policy's 25 sub-policies, chosen uniformly, like
// torchvision.transforms.AutoAugment on a PIL image. A sub-policy is two ops, each applied
// with its own probability at its own magnitude bin (of 10, over RandAugment's ranges,
// plus Invert). Per sample it draws, as torchvision's get_params does and before applying
// anything, the sub-policy's index, two uniform floats for the probabilities and two
// coins for the signs; an op runs when its float is ≤ its probability (compared in
// float32, as torch compares a float32 tensor with a Python float) and its signed
// magnitude is negated when its coin is 0. About 0.25 ms per 224×224 image on one core on
// average (ImageNet policy).
type AutoAugment struct {
	Policy        AutoAugmentPolicy // the learned policy; default ImageNetPolicy, as torchvision's
	Interpolation Interpolation     // sampling of the geometric ops; default Nearest, as torchvision's
	Fill          [3]uint8          // colour of the area geometric ops uncover; default black
}

// NewAutoAugment returns an AutoAugment with the given policy and torchvision's defaults.
func NewAutoAugment(policy AutoAugmentPolicy) *AutoAugment { return &AutoAugment{Policy: policy} }

// Validate reports an unknown Policy or Interpolation; it makes AutoAugment a Validator.
func (o *AutoAugment) Validate() error {
	if o.Policy < 0 || int(o.Policy) >= len(autoAugmentPolicies) {
		return paramErrorf("AutoAugment", "Policy %d is not ImageNetPolicy, CIFAR10Policy or SVHNPolicy", int(o.Policy))
	}
	return checkInterpolation("AutoAugment", o.Interpolation)
}

// OutputSize returns width, height: AutoAugment keeps the size. It makes AutoAugment a
// Sizer.
func (o *AutoAugment) OutputSize(width, height int) (w, h int) { return width, height }

// autoAugmentDraw is AutoAugment.get_params: the sub-policy, two probabilities and two
// sign coins.
type autoAugmentDraw struct {
	policy int
	probs  [2]float32
	signs  [2]int
}

func (o *AutoAugment) draw(c *Context) autoAugmentDraw {
	var d autoAugmentDraw
	d.policy = c.Rand.IntN(len(autoAugmentPolicies[o.Policy]))
	d.probs[0], d.probs[1] = c.Rand.Float32(), c.Rand.Float32()
	d.signs[0], d.signs[1] = c.Rand.IntN(2), c.Rand.IntN(2)
	return d
}

// Apply runs the drawn sub-policy on src.
func (o *AutoAugment) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o.apply(c, src, o.draw(c)), nil
}

// apply runs the sub-policy d selects, as AutoAugment.forward does.
func (o *AutoAugment) apply(c *Context, src *decode.Image, d autoAugmentDraw) *decode.Image {
	img := src
	for i, s := range autoAugmentPolicies[o.Policy][d.policy] {
		// probs[i] <= p compares in float32: a Python float does not promote a tensor.
		if d.probs[i] > float32(s.p) {
			continue
		}
		var mag float64
		if s.bin >= 0 {
			var signed bool
			mag, signed, _ = augSpace(s.op, false, 10, int(s.bin), img.Width, img.Height)
			if signed && d.signs[i] == 0 {
				mag = -mag
			}
		}
		img = applyAugOp(c, img, s.op, mag, o.Interpolation, o.Fill)
	}
	return img
}

func (o *AutoAugment) String() string {
	return fmt.Sprintf("AutoAugment(policy=%v, interpolation=%v, fill=%v)", o.Policy, o.Interpolation, o.Fill)
}
