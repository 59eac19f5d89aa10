/* The launch configuration of the cuda kernel library's kernels: the block
 * sizes and per-block shares of work that runtime/cuda/ launches with, and
 * that the cuda target's machine model (targets/cuda/LibraryLaunches.cpp
 * and GeneratedLaunches.cpp) reads to predict their time. A change here
 * changes both. Nothing here is a device's figure: SM counts and cache
 * sizes come from the device (at run time) or its model (when predicted).
 * C-compatible. */
#ifndef OTCRT_LAUNCH_CONFIG_H
#define OTCRT_LAUNCH_CONFIG_H

#include <stdint.h>

/// Threads per block of the row kernels: one block per row of a layer or
/// RMS norm and of a cross-entropy's logits (layer_norm.cu,
/// cross_entropy.cu), and of the gradient norm's partial sums.
#define OTCRT_CUDA_ROW_BLOCK 256

/// A layer or RMS norm over rows of at most OTCRT_CUDA_NORM_WARP_MAX_COLS
/// elements runs its row kernels (forward, and dx in the backward) one warp
/// per row, OTCRT_CUDA_NORM_WARP_ROWS rows a block of OTCRT_CUDA_ROW_BLOCK
/// threads, its reductions warp shuffles alone (layer_norm.cu): a block per
/// row of 768 elements keeps an H100 SM's loads to its 8 resident rows and
/// waits on two block-wide reductions per row; a warp per row keeps 64 rows
/// in flight. Longer rows keep a block each.
#define OTCRT_CUDA_NORM_WARP_ROWS (OTCRT_CUDA_ROW_BLOCK / 32)
#define OTCRT_CUDA_NORM_WARP_MAX_COLS 2048

/// Threads of the one-block kernels that sum or count over every row of a
/// cross-entropy (cross_entropy.cu).
#define OTCRT_CUDA_REDUCE_BLOCK 1024

/// The fused softmax cross-entropy loss and gradient
/// (otcrt_cross_entropy_fused_*, cross_entropy.cu): one block of
/// OTCRT_CUDA_CE_FUSED_BLOCK threads per row. Its lse must be the
/// forward's bit for bit, and which thread adds which logits, and the block
/// reduction's tree, decide the rounding of a float sum: so it has the
/// forward's block, not a wider one, and keeps more bytes in flight by
/// having each thread issue OTCRT_CUDA_CE_FUSED_UNROLL packet loads before
/// it uses the first. A row of at most OTCRT_CUDA_CE_STAGED_ROW_BYTES is
/// staged in dynamic shared memory by the sweep that reads it, and the
/// gradient's sweep reads it there: 110 KB lets two blocks share an H100
/// SM's 228 KB (each block also reserves 1 KB) and holds GPT-2's 50304
/// bfloat16 logits (100.6 KB). A longer row is read from memory again.
#define OTCRT_CUDA_CE_FUSED_BLOCK OTCRT_CUDA_ROW_BLOCK
#define OTCRT_CUDA_CE_FUSED_UNROLL 4
#define OTCRT_CUDA_CE_STAGED_ROW_BYTES (110 * 1024)

/// The gradient norm's partial sums of squares (sum_squares.cu: otcrt_sum_squares
/// and otcrt_grad_factor): a range of n elements gets one block of
/// OTCRT_CUDA_ROW_BLOCK threads per OTCRT_CUDA_SUMSQ_PER_THREAD elements a
/// thread, at most OTCRT_CUDA_SUMSQ_MAX_BLOCKS (then the grid strides,
/// each thread loading OTCRT_CUDA_SUMSQ_UNROLL elements before it adds
/// them); one block of OTCRT_CUDA_ROW_BLOCK threads adds the partials.
#define OTCRT_CUDA_SUMSQ_PER_THREAD 8
#define OTCRT_CUDA_SUMSQ_MAX_BLOCKS 1024
#define OTCRT_CUDA_SUMSQ_UNROLL 4
static inline int64_t otcrt_sumsq_blocks(int64_t n) {
  int64_t per = (int64_t)OTCRT_CUDA_ROW_BLOCK * OTCRT_CUDA_SUMSQ_PER_THREAD;
  int64_t b = (n + per - 1) / per;
  return b < 1 ? 1 : (b > OTCRT_CUDA_SUMSQ_MAX_BLOCKS ? OTCRT_CUDA_SUMSQ_MAX_BLOCKS : b);
}

/// The two-stage column reductions of the column sums (column_sum.cu) and
/// of the norms' parameter gradients (layer_norm.cu), column_reduce.cuh:
/// stage 1 runs one block per (tile of OTCRT_CUDA_COLUMN_TILE columns,
/// chunk of rows) with OTCRT_CUDA_COLUMN_TILE_LANES x
/// OTCRT_CUDA_COLUMN_TILE_PHASES threads, each adding every
/// OTCRT_CUDA_COLUMN_TILE_PHASES-th row of its chunk; stage 2 adds the
/// chunks' partials, one block of 32 columns x OTCRT_CUDA_COLUMN_ADD_GROUPS
/// chunk groups per 32 columns of each result. Chunks are cut so that
/// stage 1 has about otcrt_column_target_blocks(SMs) blocks: two full waves
/// of the device's SMs at OTCRT_CUDA_COLUMN_BLOCKS_PER_SM blocks of 256
/// threads (2112 on an H100's 132 SMs). The runtime passes the SMs of the
/// device it runs on; the compiler's prediction, those of its device model.
#define OTCRT_CUDA_COLUMN_TILE 64
#define OTCRT_CUDA_COLUMN_TILE_LANES 8
#define OTCRT_CUDA_COLUMN_TILE_PHASES 32
#define OTCRT_CUDA_COLUMN_ADD_GROUPS 8
#define OTCRT_CUDA_COLUMN_WAVES 2
#define OTCRT_CUDA_COLUMN_BLOCKS_PER_SM 8
static inline int64_t otcrt_column_target_blocks(int64_t sms) {
  int64_t b = OTCRT_CUDA_COLUMN_WAVES * sms * OTCRT_CUDA_COLUMN_BLOCKS_PER_SM;
  return b < 1 ? 1 : b;
}

/// How a reduction of `rows` x `cols` into `planes` results is cut, its
/// partials ([planes][chunks][cols] floats) within `scratch_floats`, for a
/// stage-1 grid of about `target_blocks` blocks: the tiles, the rows of a
/// chunk and the chunks. The kernels and the compiler's prediction of their
/// time both call this.
static inline void otcrt_column_plan(int64_t rows, int64_t cols, int planes,
                                     int64_t scratch_floats,
                                     int64_t target_blocks, int64_t *tiles,
                                     int64_t *chunk_rows, int64_t *chunks) {
  int64_t t = (cols + OTCRT_CUDA_COLUMN_TILE - 1) / OTCRT_CUDA_COLUMN_TILE;
  int64_t target = t > 0 ? target_blocks / t : 1;
  int64_t cr, n;
  target = target < 1 ? 1 : target;
  cr = (rows + target - 1) / target;
  cr = cr < OTCRT_CUDA_COLUMN_TILE_PHASES ? OTCRT_CUDA_COLUMN_TILE_PHASES : cr;
  n = (rows + cr - 1) / cr;
  while (n > 1 && n * cols * planes > scratch_floats) {
    cr *= 2;
    n = (rows + cr - 1) / cr;
  }
  *tiles = t;
  *chunk_rows = cr;
  *chunks = n < 1 ? 1 : n;
}

/// How many iterations of a column-sum thread's loop over its rows, and of
/// a norm parameter-gradient thread's (2 where it loads bfloat16 packets),
/// issue their loads together: the loops' `#pragma unroll`, what nvcc 13
/// at -O3 chooses for them by itself. The other loops of the library's
/// kernels load once per iteration (but for the fused cross-entropy's
/// first sweep, OTCRT_CUDA_CE_FUSED_UNROLL above).
#define OTCRT_CUDA_COLUMN_SUM_UNROLL 4
#define OTCRT_CUDA_PARAM_GRAD_UNROLL 4
#define OTCRT_CUDA_PARAM_GRAD_UNROLL_BF16_PACKETS 2

/// Bytes one access moves where a row allows it (common.cuh's packets: 4
/// floats or 8 bfloat16).
#define OTCRT_CUDA_PACKET_BYTES 16

#endif /* OTCRT_LAUNCH_CONFIG_H */
