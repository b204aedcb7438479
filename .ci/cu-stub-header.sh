#!/usr/bin/env bash
# Makes an include folder with a cuda.h that lets cgo *compile* gorgonia.org/cu (and
# gpu/cuinterop, which imports it) on a machine without the CUDA toolkit, for compile checks:
#
#   CGO_ENABLED=1 CGO_CFLAGS="-I$(bash .ci/cu-stub-header.sh /tmp/cu-include)" go vet -tags cuda ./gpu/...
#
# Usage: cu-stub-header.sh [--cuda 12|13] [DIR]   (default: --cuda 12, DIR /tmp/cu-include)
#
# No NVIDIA header is committed: the header is derived at run time from the cu module's own
# cmd/genlib/cuda.h (a preprocessed CUDA 10.2-era header that lost its #defines), at the version
# go.mod requires (CU_VERSION overrides it). It is for compiling only: never link or run a
# binary built with it against a real driver. Run from the repository (it asks the go command
# for the module); prints the folder.
#
# --cuda 12 (the default) names functions as a real CUDA 12.x cuda.h does: the #defines below
# (cuCtxCreate -> cuCtxCreate_v2, cuMemAlloc -> cuMemAlloc_v2, ...) come before the declarations,
# so those declare the _v2 symbols and cgo resolves C.cuCtxCreate through the macro. Only names
# whose CUDA 12 target has the same prototype are mapped. CUDA 12 also maps these, with changed
# prototypes, which the stub does not model: cuGraphInstantiate (-> cuGraphInstantiateWithFlags),
# cuGraphExecUpdate_v2, cuStreamGetCaptureInfo_v2, cuGetProcAddress_v2. gorgonia.org/cu calls
# none of them; the script fails if that changes. The CUDA 12 mapping of cuGraphAddKernelNode,
# cuGraphKernelNode{Get,Set}Params, cuGraphExecKernelNodeSetParams (CUDA_KERNEL_NODE_PARAMS
# gains kern and ctx fields) and cuStreamBatchMemOp (its params union changes) keeps the
# prototype text; the stub keeps the CUDA 10 structs, which cu fills by field name.
#
# --cuda 13 makes CUDA 13.0's changes to functions cu calls on top of that: cuCtxCreate ->
# cuCtxCreate_v4 (a CUctxCreateParams * before flags), cuMemAdvise_v2 and cuMemPrefetchAsync_v2
# (a CUmemLocation instead of a CUdevice), cuGraphAddDependencies_v2 and cuGraphGetEdges_v2 (a
# CUgraphEdgeData * argument). gorgonia.org/cu does not compile against it; .ci/run checks that.
set -euo pipefail
cuda=12
out=
while [ $# -gt 0 ]; do
  case $1 in
    --cuda) [ $# -ge 2 ] || { echo "cu-stub-header.sh: --cuda needs 12 or 13" >&2; exit 2; }; cuda=$2; shift 2 ;;
    --cuda=*) cuda=${1#--cuda=}; shift ;;
    -*) echo "usage: cu-stub-header.sh [--cuda 12|13] [DIR]" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "usage: cu-stub-header.sh [--cuda 12|13] [DIR]" >&2; exit 2; }; out=$1; shift ;;
  esac
done
case $cuda in 12|13) ;; *) echo "cu-stub-header.sh: --cuda must be 12 or 13, not '$cuda'" >&2; exit 2 ;; esac
out=${out:-/tmp/cu-include}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."
ver=${CU_VERSION:-$(go list -m -f '{{.Version}}' gorgonia.org/cu)}
dir=$(go mod download -json "gorgonia.org/cu@$ver" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
src="$dir/cmd/genlib/cuda.h"
[ -f "$src" ] || { echo "cu-stub-header.sh: no $src" >&2; exit 1; }
start=$(grep -n '^typedef uint32_t cuuint32_t;' "$src" | head -1 | cut -d: -f1)
[ -n "$start" ] || { echo "cu-stub-header.sh: $src has no 'typedef uint32_t cuuint32_t;' line to start from" >&2; exit 1; }

# Functions whose CUDA 12 form has a different prototype that the stub does not model: cu must
# not call them, or the CUDA 12 check would pass where a real CUDA 12 cuda.h fails.
unmodelled='cuGraphInstantiate|cuGraphExecUpdate|cuStreamGetCaptureInfo|cuGetProcAddress'
if hits=$(grep -nE "\bC\.($unmodelled)\b|\b($unmodelled) *\(" "$dir"/*.go "$dir"/*.c 2>/dev/null | grep -v '_test\.go:'); then
  echo "cu-stub-header.sh: gorgonia.org/cu@$ver calls a function whose CUDA 12 prototype changed and that this stub does not map; model it here:" >&2
  echo "$hits" >&2
  exit 1
fi

# CUDA 12.x cuda.h's renames whose target keeps the prototype, all to NAME_v2 except
# cuTexRefSetAddress2D_v3 (cuMemcpy*/cuMemset* go through __CUDA_API_PTDS/PTSZ, which is the
# plain _v2 name without per-thread default streams).
v2='cuDeviceTotalMem cuCtxCreate cuModuleGetGlobal cuMemGetInfo cuMemAlloc cuMemAllocPitch cuMemFree
cuMemGetAddressRange cuMemAllocHost cuMemHostGetDevicePointer cuMemcpyHtoD cuMemcpyDtoH
cuMemcpyDtoD cuMemcpyDtoA cuMemcpyAtoD cuMemcpyHtoA cuMemcpyAtoH cuMemcpyAtoA cuMemcpyHtoAAsync
cuMemcpyAtoHAsync cuMemcpy2D cuMemcpy2DUnaligned cuMemcpy3D cuMemcpyHtoDAsync cuMemcpyDtoHAsync
cuMemcpyDtoDAsync cuMemcpy2DAsync cuMemcpy3DAsync cuMemsetD8 cuMemsetD16 cuMemsetD32
cuMemsetD2D8 cuMemsetD2D16 cuMemsetD2D32 cuArrayCreate cuArrayGetDescriptor cuArray3DCreate
cuArray3DGetDescriptor cuTexRefSetAddress cuTexRefGetAddress cuTexRefSetAddress2D
cuGraphicsResourceGetMappedPointer cuCtxDestroy cuCtxPopCurrent cuCtxPushCurrent cuStreamDestroy
cuEventDestroy cuLinkCreate cuLinkAddData cuLinkAddFile cuMemHostRegister
cuGraphicsResourceSetMapFlags cuStreamBeginCapture cuDevicePrimaryCtxRelease
cuDevicePrimaryCtxReset cuDevicePrimaryCtxSetFlags cuIpcOpenMemHandle cuGraphAddKernelNode
cuGraphKernelNodeGetParams cuGraphKernelNodeSetParams cuGraphExecKernelNodeSetParams
cuStreamWriteValue32 cuStreamWaitValue32 cuStreamWriteValue64 cuStreamWaitValue64
cuStreamBatchMemOp'
# CUDA 13.0's renames with new prototypes, of functions cu calls (cuCtxCreate replaces its _v2).
v13='cuCtxCreate cuMemAdvise cuMemPrefetchAsync cuGraphAddDependencies cuGraphGetEdges'

declared() { grep -qE "(^|[ *])$1 *\(" "$src"; }
for f in $v2 $v13; do
  declared "$f" || { echo "cu-stub-header.sh: $src does not declare $f" >&2; exit 1; }
done

body=$(sed -n "${start},\$p" "$src")
if [ "$cuda" = 13 ]; then
  # Drop the old prototypes: the #defines would turn them into conflicting ones.
  body=$(sed -E "/^CUresult ($(echo $v13 | tr ' ' '|'))\(/d" <<<"$body")
  for f in $v13; do
    ! grep -qE "(^|[ *])$f *\(" <<<"$body" ||
      { echo "cu-stub-header.sh: could not drop the CUDA 10 prototype of $f" >&2; exit 1; }
  done
fi

mkdir -p "$out"
{
  echo '#ifndef CONVEYOR_CU_STUB_H'
  echo '#define CONVEYOR_CU_STUB_H'
  echo "/* Compile-only stand-in with CUDA $cuda naming, made by .ci/cu-stub-header.sh from gorgonia.org/cu@$ver cmd/genlib/cuda.h. */"
  echo '#include <stdint.h>'
  echo '#include <stddef.h>'
  echo '#include <stdlib.h>'
  echo "#define CUDA_VERSION ${cuda}000"
  # Flags cu uses that the preprocessed header lost with its #defines.
  echo '#define CU_TRSF_READ_AS_INTEGER 0x01'
  echo '#define CU_TRSF_NORMALIZED_COORDINATES 0x02'
  echo '#define CU_TRSF_SRGB 0x10'
  echo '#define CU_TRSA_OVERRIDE_FORMAT 0x01'
  for f in $v2; do
    case $cuda:$f in
      13:cuCtxCreate) echo '#define cuCtxCreate cuCtxCreate_v4' ;;
      *:cuTexRefSetAddress2D) echo '#define cuTexRefSetAddress2D cuTexRefSetAddress2D_v3' ;;
      *) echo "#define $f ${f}_v2" ;;
    esac
  done
  if [ "$cuda" = 13 ]; then
    for f in $v13; do [ "$f" = cuCtxCreate ] || echo "#define $f ${f}_v2"; done
  fi
  printf '%s\n' "$body"
  if [ "$cuda" = 13 ]; then
    cat <<'EOF'
typedef struct CUexecAffinityParam_st CUexecAffinityParam;
typedef struct CUctxCigParam_st CUctxCigParam;
typedef struct CUctxCreateParams_st {
	CUexecAffinityParam* execAffinityParams;
	int numExecAffinityParams;
	CUctxCigParam* cigParams;
} CUctxCreateParams;
typedef struct CUgraphEdgeData_st {
	unsigned char from_port;
	unsigned char to_port;
	unsigned char type;
	unsigned char reserved[5];
} CUgraphEdgeData;
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev);
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream);
CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* edgeData, size_t numDependencies);
CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edgeData, size_t* numEdges);
EOF
  fi
  echo '#endif'
} > "$out/cuda.h"
echo "$out"
