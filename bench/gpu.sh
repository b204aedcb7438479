#!/bin/bash
# Builds the static binaries that verify the GPU path on a machine with an NVIDIA GPU, or,
# with --run, runs them there (it needs only the NVIDIA driver, no CUDA toolkit).
#
#   bash bench/gpu.sh            # here: build .gpubin/ (CGO_ENABLED=0; add .gpubin/ to .git/info/exclude)
#   bash bench/gpu.sh --run DIR  # on the GPU machine: contract tests on cuda:0, the bandwidth report,
#                                # the 20 ms-step overlap test; figures land in DIR
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != --run ]; then
  mkdir -p .gpubin
  CGO_ENABLED=0 go test -c -o .gpubin/gpu.test ./gpu
  CGO_ENABLED=0 go test -c -o .gpubin/pipeline.test ./pipeline
  CGO_ENABLED=0 go build -o .gpubin/conveyor ./cmd/conveyor
  ls -l .gpubin
  exit 0
fi
out=${2:?usage: gpu.sh --run OUTDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt" || true
export CONVEYOR_TEST_DEVICE=${CONVEYOR_TEST_DEVICE:-cuda:0} CONVEYOR_OUT=$out
(cd gpu && ../.gpubin/gpu.test -test.v -test.count=1 -test.run 'Contract|GPUReport') 2>&1 | tee "$out/gpu-tests.txt"
(cd pipeline && ../.gpubin/pipeline.test -test.v -test.count=1 -test.run 'GPU') 2>&1 | tee "$out/pipeline-gpu-tests.txt"
.gpubin/conveyor bench --images 2000 --epochs 2 --workers 8 --device "$CONVEYOR_TEST_DEVICE" --step 20ms 2>&1 | tee "$out/bench-step20ms.txt"
.gpubin/conveyor bench --images 2000 --epochs 2 --workers 8 --device "$CONVEYOR_TEST_DEVICE" --device-convert --step 20ms 2>&1 | tee "$out/bench-convert-step20ms.txt"
