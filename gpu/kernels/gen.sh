#!/bin/bash
# Regenerates convert.ptx from body.ll and nvptx.ll with LLVM's NVPTX back end (Debian
# package llvm). .target sm_75 with PTX ISA 6.3 (the lowest ISA that knows sm_75, which LLVM
# picks): sm_75 (Turing) is the oldest target CUDA 13's compiler still takes, and ISA 6.3
# needs only a CUDA 10.0 driver, so CUDA 12 and 13 drivers JIT it for whatever GPU they run
# (see docs/DESIGN.md). Run from anywhere; writes next to itself.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
llvm-link body.ll nvptx.ll -o "$tmp/all.bc"
# Only the kernels stay visible; the per-pixel bodies are inlined into them.
opt -internalize -internalize-public-api-list=conveyor_u8_to_f32,conveyor_u8_to_f16,conveyor_u8_to_bf16 -O3 -globaldce "$tmp/all.bc" -o "$tmp/opt.bc"
llc -O3 -march=nvptx64 -mcpu=sm_75 -nvptx-fma-level=0 "$tmp/opt.bc" -o convert.ptx
