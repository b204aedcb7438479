// Package augment holds the per-sample operations that run after decoding (crops, flips,
// colour jitter, ...) with torchvision's semantics, and the Packer that writes the final
// sample straight into its slot of a batch buffer.
//
// Every op draws its randomness from the Context's generator, which the loader seeds from
// (seed, epoch, sample index) only, so results never depend on worker count or timing.
// Ops and Packers are safe for concurrent use once built; a Context is not.
package augment
