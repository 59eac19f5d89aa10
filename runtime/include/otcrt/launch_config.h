/* The launch configuration of the cuda kernel library's kernels: the block
 * sizes and per-block shares of work that runtime/cuda/ launches with, and
 * that the compiler's description of each library call's launches
 * (LibraryCallOpInterface::getLibraryLaunches, ir/OtcLibraryCalls.cpp)
 * reads to predict their time. A change here changes both. C-compatible. */
#ifndef OTCRT_LAUNCH_CONFIG_H
#define OTCRT_LAUNCH_CONFIG_H

/// Threads per block of the row kernels: one block per row of a layer or
/// RMS norm and of a cross-entropy's logits (layer_norm.cu,
/// cross_entropy.cu), and of the gradient norm's partial sums.
#define OTCRT_CUDA_ROW_BLOCK 256

/// Threads of the one-block kernels that sum or count over every row of a
/// cross-entropy (cross_entropy.cu).
#define OTCRT_CUDA_REDUCE_BLOCK 1024

/// Columns per block of the column sums (column_sum.cu) and of the norms'
/// parameter gradients (layer_norm.cu).
#define OTCRT_CUDA_COLUMNS_PER_BLOCK 32

/// Row phases of a column-sum block (threads along y; each sums every
/// 32nd row) and of a norm parameter-gradient block (every 8th row).
#define OTCRT_CUDA_COLUMN_SUM_PHASES 32
#define OTCRT_CUDA_PARAM_GRAD_PHASES 8

/// How many iterations of a column-sum thread's loop over its rows, and of
/// a norm parameter-gradient thread's (2 where it loads bfloat16 packets),
/// issue their loads together: the loops' `#pragma unroll`, what nvcc 13
/// at -O3 chooses for them by itself. The other loops of the library's
/// kernels load once per iteration.
#define OTCRT_CUDA_COLUMN_SUM_UNROLL 4
#define OTCRT_CUDA_PARAM_GRAD_UNROLL 4
#define OTCRT_CUDA_PARAM_GRAD_UNROLL_BF16_PACKETS 2

/// Bytes one access moves where a row allows it (common.cuh's packets: 4
/// floats or 8 bfloat16).
#define OTCRT_CUDA_PACKET_BYTES 16

#endif /* OTCRT_LAUNCH_CONFIG_H */
