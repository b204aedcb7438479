// Package mixup mixes whole batches after packing: MixUp, CutMix and the random switch
// between them, with soft targets and label smoothing, as timm's Mixup in its 'batch'
// mode (timm/data/mixup.py).
//
// A batch of N samples is mixed with itself reversed: sample i with sample N-1-i, both
// weighted by one λ drawn per batch. MixUp blends every pixel, x_i = λ·x_i + (1-λ)·x_{N-1-i};
// CutMix pastes a box of sample N-1-i into sample i, and λ becomes the share of the image
// left outside the box. Targets are mixed the same way, y_i = λ·y_i + (1-λ)·y_{N-1-i},
// from rows that label smoothing ε makes ε/classes off and 1-ε+ε/classes on.
//
// Options.Draw draws one batch's Params from a generator the caller seeds (the loader
// seeds it from (Seed, Rank, epoch, batch number), so batches do not depend on timing); Pixels
// and Targets apply them in place; a Mixer keeps the tables uint8 and 16-bit batches are
// mixed through, so that mixing allocates nothing. Mixing a batch of 64 224×224 samples
// takes about 3 ms on one core in float32 (MixUp or CutMix), 5 ms in uint8, 9 ms in
// bfloat16 and 15 ms in float16. The functions are safe for concurrent use on different
// batches.
//
// Differences from timm: a batch of odd length is accepted (timm asserts an even one);
// its middle sample is paired with itself, so it keeps its pixels and targets up to the
// rounding of λ·x + (1-λ)·x (a unit in the last place of a float value; uint8 values
// stay). The random
// numbers come from Go's PCG, not numpy's generator, so a seed does not reproduce
// timm's draws; their distributions are the same.
package mixup
