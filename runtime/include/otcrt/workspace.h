/* The GEMM workspace of the cuda runtime: the bytes cuBLASLt may use outside
 * the arena. The runtime allocates it; the compiler adds it to the planned
 * total peak of a cuda program. C-compatible. */
#ifndef OTCRT_WORKSPACE_H
#define OTCRT_WORKSPACE_H

/// Bytes of the cuda GEMM workspace (32 MiB).
#define OTCRT_CUDA_GEMM_WORKSPACE_BYTES (32u << 20)

#endif /* OTCRT_WORKSPACE_H */
