#!/usr/bin/env bash
# Makes an include folder with a cuda.h that lets cgo *compile* gorgonia.org/cu (and
# gpu/cuinterop, which imports it) on a machine without the CUDA toolkit, for compile checks:
#
#   CGO_ENABLED=1 CGO_CFLAGS="-I$(bash .ci/cu-stub-header.sh /tmp/cu-include)" go vet -tags cuda ./gpu/...
#
# No NVIDIA header is committed: the header is derived at run time from the cu module's own
# cmd/genlib/cuda.h (a preprocessed CUDA 10-era header), at the version go.mod requires
# (CU_VERSION overrides it). It maps no _v2 symbols, so it is for compiling only: never link
# or run a binary built with it against a real driver. Run from the repository (it asks the
# go command for the module); prints the folder.
set -euo pipefail
out=${1:-/tmp/cu-include}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."
ver=${CU_VERSION:-$(go list -m -f '{{.Version}}' gorgonia.org/cu)}
dir=$(go mod download -json "gorgonia.org/cu@$ver" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
src="$dir/cmd/genlib/cuda.h"
[ -f "$src" ] || { echo "cu-stub-header.sh: no $src" >&2; exit 1; }
start=$(grep -n '^typedef uint32_t cuuint32_t;' "$src" | head -1 | cut -d: -f1)
[ -n "$start" ] || { echo "cu-stub-header.sh: $src has no 'typedef uint32_t cuuint32_t;' line to start from" >&2; exit 1; }
mkdir -p "$out"
{
  echo '#ifndef CONVEYOR_CU_STUB_H'
  echo '#define CONVEYOR_CU_STUB_H'
  echo '#include <stdint.h>'
  echo '#include <stddef.h>'
  echo '#include <stdlib.h>'
  # Flags cu uses that the preprocessed header lost with its #defines.
  echo '#define CU_TRSF_READ_AS_INTEGER 0x01'
  echo '#define CU_TRSF_NORMALIZED_COORDINATES 0x02'
  echo '#define CU_TRSF_SRGB 0x10'
  echo '#define CU_TRSA_OVERRIDE_FORMAT 0x01'
  sed -n "${start},\$p" "$src"
  echo '#endif'
} > "$out/cuda.h"
echo "$out"
