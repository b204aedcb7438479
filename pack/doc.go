// Package pack writes a decoded, augmented sample straight into its slot of a batch
// buffer, in the layout (NCHW or NHWC) and element type (uint8, float32, float16,
// bfloat16) a training step consumes, optionally normalised per channel.
//
// The values are those torchvision's ToTensor and Normalize give, bit for bit in float32,
// rounded to nearest even for float16 and bfloat16. The loader, the GPU backends (which
// convert uint8 batches on the device into the same values) and users' own code share
// these types, which is why they live apart from the augmentation ops.
//
// Sample is a view of one packed slot, for the ops torchvision runs on the normalised
// tensor (augment.RandomErasing): it reads values and fills rectangles with per-channel
// constants or per-value noise in any layout and dtype, rounding as Pack does.
//
// A Packer is safe for concurrent use once built.
package pack
