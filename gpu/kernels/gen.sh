#!/bin/bash
# Regenerates convert.ptx from body.ll and nvptx.ll with LLVM's NVPTX back end (Debian
# package llvm). sm_52 / the PTX ISA LLVM picks for it load on every GPU since Maxwell:
# the driver compiles PTX for the GPU it runs on. Run from anywhere; writes next to itself.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
llvm-link body.ll nvptx.ll -o "$tmp/all.bc"
# Only the kernels stay visible; the per-pixel bodies are inlined into them.
opt -internalize -internalize-public-api-list=conveyor_u8_to_f32,conveyor_u8_to_f16,conveyor_u8_to_bf16 -O3 -globaldce "$tmp/all.bc" -o "$tmp/opt.bc"
llc -O3 -march=nvptx64 -mcpu=sm_52 -nvptx-fma-level=0 "$tmp/opt.bc" -o convert.ptx
