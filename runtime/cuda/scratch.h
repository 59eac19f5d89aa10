// The device scratch of libotcrt_cuda, and the one figure of the device its
// kernels size a grid by (deviceSms): buffers the kernels use between launches
// of one call (attention's per-row terms, transposed copies and expanded masks,
// the partial sums of the two-stage column reductions, the gather gradient's
// sort, a GEMM's FP32 sums), owned by the library, one per device and per use.
// A buffer is allocated (cudaMalloc) by the first call that needs it and kept
// for the life of the process, so that later calls neither allocate nor
// synchronize and a CUDA graph that captured them stays valid; the runtime runs
// every step function once eagerly before it captures one, which makes those
// first calls. Calls on one device share a use's buffer: they must be ordered
// (one stream), as the generated programs' calls are.
#ifndef OTCRT_CUDA_SCRATCH_H
#define OTCRT_CUDA_SCRATCH_H

#include <cuda_runtime.h>

#include <cstddef>

namespace otcrt {
namespace cuda {

/// What a scratch buffer holds.
enum class ScratchUse {
  /// attention.cu: the backward's D_i per query row, the fallback kernels'
  /// or, with sinks, sinkGradient's after cuDNN (grows with the rows).
  AttentionRowD,
  /// attention.cu: the transposed copies of a [b, t, h, d] call (grows).
  AttentionLayout,
  /// attention.cu: a mask broadcast over the queries written out along
  /// them, as cuDNN's bias must be (grows).
  AttentionMask,
  /// attention.cu: a key padding's per-sequence lengths for cuDNN, 2 x b
  /// int32 (keyLengths; grows with the batch).
  AttentionLengths,
  /// Partial sums of the column reductions (column_sum.cu, the norms'
  /// parameter gradients) and of the gather gradient's long runs:
  /// OTCRT_CUDA_REDUCTION_SCRATCH_BYTES, fixed.
  Reduction,
  /// The gather gradient's sort (keys, values and CUB's temporary storage):
  /// OTCRT_CUDA_SORT_SCRATCH_BYTES, fixed.
  Sort,
  /// gemm_sums.cpp: the FP32 sums of an otcrt_gemm_sums call whose sums
  /// are bf16 or accumulated, before the kernel that finishes them (grows
  /// with the width).
  GemmSums,
  Count
};

/// At least `bytes` bytes of device memory for `use` on the current device:
/// the buffer of an earlier call when it is large enough, else a new one
/// (a smaller buffer it replaces is kept, since a captured graph may still
/// read it). NULL when it must allocate while `stream` is being captured
/// into a graph, or when cudaMalloc fails.
char *scratch(ScratchUse use, size_t bytes, cudaStream_t stream);

/// The fixed-size buffers: OTCRT_CUDA_REDUCTION_SCRATCH_BYTES of floats
/// and OTCRT_CUDA_SORT_SCRATCH_BYTES of bytes (otcrt/workspace.h).
float *reductionScratch(cudaStream_t stream);
char *sortScratch(cudaStream_t stream);

/// The streaming multiprocessors of the current device (read once per
/// device), which the column reductions size their grids by
/// (otcrt_column_target_blocks); 1 when it cannot be read.
int deviceSms();

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_SCRATCH_H
