/* The device memory of the cuda runtime outside the arena: the GEMM
 * workspace cuBLASLt may use and the kernel library's fixed scratch buffers
 * (runtime/cuda/scratch.h), each allocated once per device by the first call
 * that needs it. The compiler adds their sum to the planned total peak of a
 * cuda program. C-compatible. */
#ifndef OTCRT_WORKSPACE_H
#define OTCRT_WORKSPACE_H

/// Bytes of the cuda GEMM workspace (32 MiB).
#define OTCRT_CUDA_GEMM_WORKSPACE_BYTES (32u << 20)

/// Bytes of the partial sums of the two-stage reductions (4 MiB): column
/// sums and the norms' parameter gradients (chunks x columns floats per
/// result: about 0.5 MiB at their target of ~2100 blocks, whatever the
/// shape) and the gather gradient's runs that cross its pieces (two rows of
/// `inner` floats per piece of 32 positions: 1.5 MiB for 8192 positions of
/// 768, GPT-2 124M). The kernels pick their chunks and pieces so that the
/// partials fit: larger shapes take longer ones, never more memory.
#define OTCRT_CUDA_REDUCTION_SCRATCH_BYTES (4u << 20)

/// Bytes of the gather gradient's sort (4 MiB): two buffers of 32-bit keys
/// and two of 32-bit positions (16 bytes a position) and CUB's temporary
/// storage, enough for about 240K positions (GPT-2 at 8K tokens and a
/// micro-batch of 16 needs 131K) in one sort; more positions are sorted and
/// summed in batches of that size.
#define OTCRT_CUDA_SORT_SCRATCH_BYTES (4u << 20)

/// Everything above: what a cuda program may hold outside its arena.
#define OTCRT_CUDA_WORKSPACE_BYTES                                             \
  (OTCRT_CUDA_GEMM_WORKSPACE_BYTES + OTCRT_CUDA_REDUCTION_SCRATCH_BYTES +      \
   OTCRT_CUDA_SORT_SCRATCH_BYTES)

#endif /* OTCRT_WORKSPACE_H */
