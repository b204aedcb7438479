//go:build amd64 && !purego

package pack

import "golang.org/x/sys/cpu"

// hasFMA reports whether the CPU has the AVX2 and FMA instructions the float32 kernels
// use (and the OS saves the YMM registers, which golang.org/x/sys/cpu checks).
var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// packNCHW32FMA normalises n pixels of packed RGB at src (n a multiple of 8; it reads 4
// bytes past the last pixel) with k's per-channel constants into the planes red, green
// and blue.
//
//go:noescape
func packNCHW32FMA(red, green, blue *float32, src *uint8, k *fmaConsts, n int)

// packNHWC32FMA normalises n samples of packed RGB at src (n a multiple of 24, starting
// at a red sample) with k's per-position constants into dst.
//
//go:noescape
func packNHWC32FMA(dst *float32, src *uint8, k *fmaConsts, n int)

// packNCHW32FMAMirror is packNCHW32FMA for the n pixels at src (n a multiple of 8)
// written in reverse order: pixel n-1 first. It reads no byte outside them.
//
//go:noescape
func packNCHW32FMAMirror(red, green, blue *float32, src *uint8, k *fmaConsts, n int)
