// Package augment holds the per-sample operations that run after decoding (crops, flips,
// colour jitter, ...) with torchvision's semantics. Package pack writes their output into
// a batch.
//
// The ops follow torchvision.transforms (v1) applied to PIL images: RandomResizedCrop
// draws its rectangle exactly as get_params does and resamples with PIL's antialiased
// bilinear filter (decode.Resizer) in one pass; Resize and CenterCrop use torchvision's
// size and offset rounding; ColorJitter and RandomGrayscale reproduce Pillow's integer
// and float arithmetic (ImageEnhance blends, 8-bit HSV, fixed-point luma).
//
// The geometric ops (RandomRotation, RandomAffine, RandomPerspective, and the functional
// Affine and Rotate) compute torchvision's matrices (_get_inverse_affine_matrix,
// _get_perspective_coeffs) and sample as Pillow's Image.transform does: output pixel
// centres mapped to the source, nearest in 16.16 fixed point, bilinear over the 2×2 or
// bicubic over the 4×4 neighbourhood, Fill outside; testdata/geometry holds torchvision's
// outputs, which they match pixel for pixel. RandomCrop pads as torchvision (constant, edge, reflect,
// symmetric) without building the padded image.
//
// RandomErasing is a TensorOp: it runs on the packed, normalised sample (a pack.Sample),
// as torchvision's runs on the tensor after Normalize. TensorOps come last in a Pipeline;
// Pipeline.Apply stops before them and Pipeline.ApplyTensor runs them on the packed slot
// with the same Context.
//
// The photometric ops RandomSolarize, RandomPosterize, RandomAutocontrast and
// RandomEqualize, and the functional Solarize, Posterize, Invert, Autocontrast, Equalize
// and AdjustSharpness, are Pillow's ImageOps and ImageEnhance, pixel for pixel.
// GaussianBlur draws sigma and builds its kernel as torchvision does and convolves
// separably in float32 (within one level of torch's 2-D convolution). RandAugment,
// TrivialAugmentWide and AutoAugment (ImageNet, CIFAR-10 and SVHN policies) follow
// torchvision.transforms.autoaugment: the same op space and magnitude bins, the same
// draws in the same order (from the Context, not torch's generator), the shears about the
// top-left corner, and the geometric ops through Affine and Rotate.
//
// Every op draws its randomness from the Context's generator, which the loader seeds from
// (seed, epoch, sample index) only, so results never depend on worker count or timing.
// Ops either change their input in place or write into one of the Context's two scratch
// images, so after warm-up a sample costs no allocations. Users add their own operations
// by implementing Op: Apply and String.
//
// Ops may implement two optional interfaces that let Pipeline.Validate reject a bad
// pipeline before the first sample: Validator (Validate() error) checks the parameters,
// and Sizer (OutputSize(width, height int) (w, h int)) tells the output size without an
// image, so that a pipeline that cannot produce the packed size is found at once. Every op
// of this package implements both. Where the final size depends on the image, the loader
// still checks it for every sample. An op whose size varies with its draws
// (RandomRotation with Expand) also implements MaxSizer, a bound on its size that
// Pipeline.Largest uses to size the ops' buffers.
//
// Ops are safe for concurrent use once built; a Context is not.
package augment
