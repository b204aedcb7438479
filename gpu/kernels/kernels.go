// Package kernels holds the GPU side of package gpu: the conversion kernels as PTX text
// (convert.ptx), which the CUDA driver compiles for whatever GPU it runs on, so no CUDA
// toolkit is needed to build or run conveyor, and the LLVM IR they are generated from.
//
// body.ll is the per-pixel work, target-independent; nvptx.ll wraps it into one CUDA
// entry point per output dtype; gen.sh links, optimises and lowers them with LLVM's
// NVPTX back end into convert.ptx. The tests compile body.ll for the host as well and
// check it against pack.Packer bit for bit, and check that convert.ptx is what gen.sh
// makes from the sources.
package kernels

import _ "embed"

// PTX is the conversion kernels' PTX text (not NUL-terminated).
//
//go:embed convert.ptx
var PTX string

// Body is body.ll, the kernels' per-pixel work in LLVM IR.
//
//go:embed body.ll
var Body string

// Entry points in PTX, one per output dtype. Each takes, in order: in (u8*, NHWC), out,
// pixels (N*H*W, u64), plane (H*W, u64), nchw (u32, 0 or 1), norm (u32, 0 or 1),
// mean[0..2] and std[0..2] (f32). Launch one thread per pixel, blocks along x.
const (
	F32  = "conveyor_u8_to_f32"
	F16  = "conveyor_u8_to_f16"
	BF16 = "conveyor_u8_to_bf16"
)
