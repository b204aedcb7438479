#!/usr/bin/env bash
# The hardware check of conveyor's GPU path, prepared here and run on a GPU machine in one
# call (such a machine may be lent for a few minutes only, with no Go and no network).
#
#   bash bench/gpu.sh                # here: build stripped static binaries into .gpubin/
#   bash bench/gpu.sh --dry-run DIR  # here: the very same steps against the stand-in driver
#                                    # (gpu/gputest), PyTorch on the CPU; exits 0 when all pass
#   bash bench/gpu.sh --run DIR      # on the GPU machine (carry .gpubin): the check on cuda:0
#
# The steps, each under its own time limit, none stopping the others, within 8 minutes in
# all (GPU_CHECK_BUDGET seconds, default 470), writing at most 8 files into DIR:
#   env.txt            the machine: nvidia-smi, cores, ulimit -l, the libcuda and PTX JIT
#                      libraries found, ptxas -arch=sm_90 on the kernels' PTX (where ptxas is),
#                      python3's torch
#   gpu-tests.txt      package gpu's contract tests, JIT log and bandwidth report on cuda:0
#   gpu-report.json    that report: plain pinned cuMemcpyHtoD against the ring's uploads,
#                      with and without conversion, and the driver and JIT libraries used
#   pipeline-tests.txt the loader on cuda:0: a 20 ms step never waits on a copy, with and
#                      without Device.Cast, batches equal to the host's; Example_cuda
#   bench.txt          conveyor bench on one synthetic set of JPEGs (written first), train
#                      recipe, batch 256, 20 ms step: --device cuda:0, with --device-cast,
#                      and --device cpu
#   torch.txt          bench/peers/torch_dataloader.py on the same set, same recipe, batch,
#                      workers and step, in its GPU mode (pin_memory, non_blocking copies,
#                      a synchronize before each step)
#   summary.txt        each step's exit status and time, and the images/s figures
# Exit status: the number of steps that failed (0: all passed).
#
# Sizes: GPU_CHECK_IMAGES (default 4000; 400 in a dry run), GPU_CHECK_WORKERS (default: the
# cores), GPU_CHECK_BATCH (256; 32 in a dry run). Add .gpubin/ to .git/info/exclude (it is
# in .gitignore).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=$repo/.gpubin

build() {
  set -e
  mkdir -p "$bin"
  local flags=(-trimpath -ldflags='-s -w')
  CGO_ENABLED=0 go test -c "${flags[@]}" -o "$bin/gpu.test" ./gpu
  CGO_ENABLED=0 go test -c "${flags[@]}" -o "$bin/pipeline.test" ./pipeline
  CGO_ENABLED=0 go build "${flags[@]}" -o "$bin/conveyor" ./cmd/conveyor
  local total
  total=$(du -cb "$bin"/gpu.test "$bin"/pipeline.test "$bin"/conveyor | tail -1 | cut -f1)
  ls -l "$bin"
  echo "$((total / 1048576)) MiB of binaries (at most 48: the tree and they travel together, 64 MiB in all)"
  [ "$total" -le $((48 * 1048576)) ] || { echo "gpu.sh: binaries over 48 MiB" >&2; exit 1; }
  set +e
}

mode=${1:-build}
case $mode in
  build) build; exit 0 ;;
  --run|--dry-run) out=${2:?usage: gpu.sh --run DIR | --dry-run DIR} ;;
  -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu.sh: unknown argument $mode (want --run DIR, --dry-run DIR or nothing)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd) # absolute: the steps run in other folders

dry=0
images=${GPU_CHECK_IMAGES:-4000} batch=${GPU_CHECK_BATCH:-256}
workers=${GPU_CHECK_WORKERS:-$(nproc)}
py=python3
if [ "$mode" = --dry-run ]; then
  dry=1
  images=${GPU_CHECK_IMAGES:-400} batch=${GPU_CHECK_BATCH:-32}
  build >/dev/null || { echo "gpu.sh: build failed" >&2; exit 1; }
  lib=$(go run ./gpu/gputest/buildlib) || { echo "gpu.sh: cannot build the stand-in driver" >&2; exit 1; }
  export CONVEYOR_LIBCUDA=$lib
  # Debian's python3-torch, where the default python3 has no torch.
  python3 -c 'import torch' 2>/dev/null || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
fi
for f in gpu.test pipeline.test conveyor; do
  [ -x "$bin/$f" ] || { echo "gpu.sh: $bin/$f missing: run bash bench/gpu.sh first (and carry .gpubin)" >&2; exit 1; }
done
export CONVEYOR_TEST_DEVICE=${CONVEYOR_TEST_DEVICE:-cuda:0} CONVEYOR_OUT=$out
export dev=$CONVEYOR_TEST_DEVICE mode py
data=$(mktemp -d /tmp/conveyor-gpu-check-XXXXXX)
trap 'rm -rf "$data"' EXIT

budget=${GPU_CHECK_BUDGET:-470}
start=$SECONDS
failed=0
summary=$out/summary.txt
: >"$summary"

# step NAME LIMIT LOG CMD...: runs CMD with its output appended to LOG, under LIMIT seconds
# or what is left of the budget, whichever is less; records its status; never stops.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local left=$((budget - (SECONDS - start)))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -lt 5 ]; then
    printf '%-22s skipped: the %ss budget is spent\n' "$name" "$budget" | tee -a "$summary"
    failed=$((failed + 1))
    return
  fi
  local t0=$SECONDS
  { echo "### $name: $*"; } >>"$log"
  if declare -F "$1" >/dev/null; then # a function of this script: timeout runs programs
    timeout -k 5 "$limit" bash -c "$(declare -f "$1"); $*" >>"$log" 2>&1
  else
    timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  fi
  local rc=$?
  local what=ok
  [ $rc = 0 ] || what="FAILED (exit $rc$([ $rc = 124 ] && echo ", over its ${limit}s"))"
  [ $rc = 0 ] || failed=$((failed + 1))
  printf '%-22s %-40s %4ss\n' "$name" "$what" "$((SECONDS - t0))" | tee -a "$summary"
}

environment() {
  date -u
  uname -a
  echo "cores: $(nproc); memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo); ulimit -l: $(ulimit -l)"
  echo "mode: $mode; device: $dev; CONVEYOR_LIBCUDA=${CONVEYOR_LIBCUDA:-}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current --format=csv
  else
    echo "nvidia-smi: not found"
  fi
  echo "--- driver libraries on the loader path:"
  ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvidia-ptxjitcompiler|libnvidia-nvvm' || echo "(none)"
  echo "--- in the usual folders:"
  ls -l /usr/local/nvidia/lib64/libcuda.so* /usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so* \
    /usr/lib/x86_64-linux-gnu/libcuda.so* /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so* \
    /usr/lib64/libcuda.so* /usr/local/cuda/compat/libcuda.so* 2>/dev/null || echo "(none)"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  local ptxas
  ptxas=$(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null || true)
  if [ -n "$ptxas" ]; then
    echo "--- $ptxas -arch=sm_90 gpu/kernels/convert.ptx:"
    "$ptxas" --version | tail -2
    "$ptxas" -arch=sm_90 -v -o /dev/null gpu/kernels/convert.ptx && echo "ptxas: ok"
  else
    echo "ptxas: not found"
  fi
  echo "--- $py:"
  "$py" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 || true
  return 0
}

step environment 60 "$out/env.txt" environment

step gpu-tests 150 "$out/gpu-tests.txt" \
  bash -c "cd gpu && '$bin/gpu.test' -test.v -test.count=1 -test.timeout=140s -test.run 'Contract|GPUReport|JITLog|SlotReuse|NotReady|OpenContext|Driver'"

step pipeline-tests 150 "$out/pipeline-tests.txt" \
  bash -c "cd pipeline && '$bin/pipeline.test' -test.v -test.count=1 -test.timeout=140s -test.run 'GPU|DeviceStep|DeviceBatches|Example_cuda'"

common=(--recipe train --batch "$batch" --workers "$workers" --epochs 2 --step 20ms)
# The first run writes the synthetic set for the others and for PyTorch.
step bench-cuda 90 "$out/bench.txt" "$bin/conveyor" bench --images "$images" --synthetic-dir "$data/set" "${common[@]}" --device "$dev"
step bench-cuda-convert 60 "$out/bench.txt" "$bin/conveyor" bench "$data/set" "${common[@]}" --device "$dev" --device-cast
step bench-cpu 60 "$out/bench.txt" "$bin/conveyor" bench "$data/set" "${common[@]}" --device cpu

torchdev=cuda
[ $dry = 1 ] && torchdev="cuda --allow-cpu-fallback"
# shellcheck disable=SC2086
step torch 120 "$out/torch.txt" "$py" bench/peers/torch_dataloader.py "$data/set" --recipe train --batch "$batch" \
  --workers "$workers" --epochs 2 --step 20 --device $torchdev

figures=$({
  echo
  echo "images/s, last epoch (20 ms step; wait = share of the time the consumer waited for data):"
  grep -hE '^(### bench|recipe|throughput|consumer)' "$out/bench.txt" | sed 's/^/  /'
  grep -h 'epoch=1' "$out/torch.txt" | sed 's/^/  /'
  echo "mode $mode; $((SECONDS - start))s in all; $failed step(s) failed"
})
echo "$figures" | tee -a "$summary"
exit "$failed"
