#!/usr/bin/env bash
# Builds llm.c's GPT-2 trainer (train_gpt2cu: BF16, cuDNN's fused attention,
# one GPU, no MPI) for the speed benchmark's run half, which times it beside
# otc when OUT/llmc/train_gpt2cu exists (bench/speed.py run). No GPU needed:
# nvcc, cuDNN's cudnn.h and libcudnn (the CUDA toolkit's, or CUDNN_PATH's
# include/ and lib/ as for otc's runtime) and the cudnn-frontend headers
# (scripts/fetch-cudnn-frontend.sh). The checkout is copied, not changed;
# under CUDA 13 the copy gets one edit: cudaMemAdvise takes a
# cudaMemLocation where llm.c passes cudaCpuDeviceId.
#
#   bench/llmc-build.sh LLMC_CHECKOUT OUT
#       writes OUT/llmc/train_gpt2cu and OUT/llmc/commit.txt (llm.c's commit,
#       the toolkit, cuDNN, cudnn-frontend and the make command)
#   CUDA: the toolkit (default /usr/local/cuda); GPU_CC: the compute
#   capability (default 90: H100, H200); CUDNN_FRONTEND: the frontend's
#   include directory (default .deps/cudnn-frontend/include here)
set -euo pipefail
src=$(cd "${1:?usage: llmc-build.sh LLMC_CHECKOUT OUT}" && pwd)
out=${2:?usage: llmc-build.sh LLMC_CHECKOUT OUT}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA:-/usr/local/cuda}
frontend=${CUDNN_FRONTEND:-$here/../.deps/cudnn-frontend/include}
[[ -f $frontend/cudnn_frontend.h ]] ||
  { echo "llmc-build: no cudnn_frontend.h in $frontend" \
         "(scripts/fetch-cudnn-frontend.sh)" >&2; exit 1; }
frontend=$(cd "$frontend" && pwd)
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$src" --exclude=./.git --exclude=./build -cf - . | tar -C "$work" -xf -
# The Makefile looks for the frontend in ./cudnn-frontend/include (or
# ~/cudnn-frontend/include) before it takes CUDNN_FRONTEND_PATH.
mkdir -p "$work/cudnn-frontend" && ln -sfn "$frontend" "$work/cudnn-frontend/include"
cuda_version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
edit="none"
if (( ${cuda_version%%.*} >= 13 )); then
  to='cudaMemLocation{cudaMemLocationTypeHost, 0}'
  edit="cudaMemAdvise's cudaCpuDeviceId as $to"
  sed -i "s/\(SetPreferredLocation, \)cudaCpuDeviceId)/\1$to)/" "$work/llmc/cuda_utils.cuh"
  grep -q cudaMemLocationTypeHost "$work/llmc/cuda_utils.cuh" ||
    { echo "llmc-build: the cudaMemAdvise edit found nothing to change" >&2; exit 1; }
fi

# The libraries are named here, not by llm.c's Makefile, which always links
# NVML: llm.c calls it only where nvml.h is found, and a toolkit may have
# neither that nor a libnvidia-ml to link. cuDNN and NVRTC (the frontend's)
# besides cuBLAS.
includes=(-I"$frontend")
libs=(-L"$cuda/lib64" -L"$cuda/lib64/stubs")
if [[ -n ${CUDNN_PATH:-} ]]; then
  includes+=(-I"$CUDNN_PATH/include")
  libs+=(-L"$CUDNN_PATH/lib" -L"$CUDNN_PATH/lib64")
fi
libs+=(-lcublas -lcublasLt -lcudnn -lnvrtc)
echo '#include <nvml.h>' | "$cuda/bin/nvcc" "${includes[@]}" -x cu -E - > /dev/null 2>&1 &&
  libs+=(-lnvidia-ml)
make_args=(train_gpt2cu NVCC="$cuda/bin/nvcc" GPU_COMPUTE_CAPABILITY="${GPU_CC:-90}"
           USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 CUDNN_FRONTEND_PATH="$frontend"
           NVCC_INCLUDES="${includes[*]}" NVCC_LDFLAGS="${libs[*]}")
echo "llmc-build: llm.c $commit: make $(printf '%q ' "${make_args[@]}")"
make -C "$work" "${make_args[@]}"

mkdir -p "$out/llmc"
cp "$work/train_gpt2cu" "$out/llmc/train_gpt2cu"
cudnn=$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' \
  "${CUDNN_PATH:-$cuda}/include/cudnn_version.h" 2>/dev/null | paste -sd.)
{
  echo "llm.c $commit"
  echo "CUDA $cuda_version, cuDNN ${cudnn:-?}," \
    "cudnn-frontend $(cat "$frontend/../VERSION" 2>/dev/null || echo ?)"
  echo "edit: $edit"
  echo "make $(printf '%q ' "${make_args[@]}")"
} > "$out/llmc/commit.txt"
echo "llmc-build: wrote $out/llmc/train_gpt2cu ($(du -h "$out/llmc/train_gpt2cu" | cut -f1))"
