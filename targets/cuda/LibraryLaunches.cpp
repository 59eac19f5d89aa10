//===- LibraryLaunches.cpp - the kernels of the cuda library calls -------===//
//
// What the cuda kernel library launches for each library call of the otc
// dialect, read from the call's launch site in runtime/cuda/ (grid, block,
// the loop of one thread) with the constants of otcrt/launch_config.h and
// the device's own figures (its SMs, its L1): the cuda target's
// GridLaunchOpInterface models (perf/GridLaunch.h), attached to the ops by
// attachLaunchModels when the dialects load, and read by the step-time
// model. Attention runs on cuDNN where Attention.cpp says so, priced by its
// measured rate; the GEMMs a call makes are the op's own
// (LibraryCallOpInterface::getLibraryGemms).
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"
#include "targets/cuda/Launches.h"

#include "otcrt/launch_config.h"
#include "otcrt/workspace.h"

#include <algorithm>

using namespace mlir;
using namespace otc;

namespace {

/// Bytes of an optional operand or result (0 when absent).
double bytesOf(Value v) { return v ? double(byteSize(v)) : 0.0; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Bytes of one element of `v`.
int64_t elementBytes(Value v) {
  return storageBytes(getElementTypeOrSelf(v.getType()));
}

/// Elements a row kernel moves per access over rows of `cols` elements of
/// `v`'s type: a 16-byte packet when `cols` is a multiple of one (the
/// arena's buffers start 16-byte aligned), else one (common.cuh's
/// `packable`).
int64_t packWidth(int64_t cols, Value v) {
  int64_t pack = OTCRT_CUDA_PACKET_BYTES / elementBytes(v);
  return pack > 0 && cols % pack == 0 ? pack : 1;
}

/// The packets one thread of a row kernel (one block of OTCRT_CUDA_ROW_BLOCK
/// threads per row) takes in one sweep over a row of `cols` elements.
int64_t rowSweepSteps(int64_t cols, Value v) {
  return ceilDiv(cols, OTCRT_CUDA_ROW_BLOCK * packWidth(cols, v));
}

/// The largest row a row kernel reads again from its SM's L1 in a later
/// sweep: the share of one of the row blocks an SM of `d` holds (threads
/// per SM / OTCRT_CUDA_ROW_BLOCK: 8 on an H100) in its L1 (256 KB on an
/// H100: 32 KB a row). A longer row's later sweeps read memory again.
int64_t l1RowBytes(const DeviceModel &d) {
  return d.l1PerSm /
         std::max<int64_t>(1, d.maxThreadsPerSm / OTCRT_CUDA_ROW_BLOCK);
}

/// A row kernel over `rows` rows of `cols` elements of `v` that sweeps each
/// row `sweeps` times (the first from memory, the later ones from L1 while
/// the row fits there) and moves `bytes` besides the first sweep's reads,
/// plus `extraSteps` dependent loads of its own (labels, statistics). With
/// `warpRows`, a warp per row (the norms' rows of at most
/// OTCRT_CUDA_NORM_WARP_MAX_COLS, layer_norm.cu): OTCRT_CUDA_NORM_WARP_ROWS
/// rows a block, a thread taking 8 times the packets, and 8 times the rows
/// sharing an SM's L1.
KernelLaunch rowKernel(const DeviceModel &d, StringRef what, int64_t rows,
                       int64_t cols, Value v, int64_t sweeps, double bytes,
                       int64_t extraSteps = 0, bool warpRows = false) {
  KernelLaunch l;
  l.what = what.str();
  l.blocks = warpRows ? ceilDiv(rows, OTCRT_CUDA_NORM_WARP_ROWS) : rows;
  l.threads = OTCRT_CUDA_ROW_BLOCK;
  int64_t perSweep = warpRows ? ceilDiv(cols, 32 * packWidth(cols, v))
                              : rowSweepSteps(cols, v);
  double rowBytes = double(cols) * elementBytes(v);
  int64_t l1Row = l1RowBytes(d);
  bool cached =
      rowBytes <= (warpRows ? l1Row / OTCRT_CUDA_NORM_WARP_ROWS : l1Row);
  l.steps = perSweep * (cached ? 1 : sweeps) + extraSteps;
  l.cachedSteps = cached ? perSweep * (sweeps - 1) : 0;
  l.bytes = rows * rowBytes * (cached ? 1 : sweeps) + bytes;
  return l;
}

/// The two kernels of a column reduction of a [rows, cols] matrix of `v`
/// into `planes` results on `d` (column_reduce.cuh, cut by
/// otcrt_column_plan for the device's SMs):
/// stage 1, one block per (tile, chunk), each thread adding chunkRows /
/// phases rows of its columns `unroll` loads at a time (then one store),
/// and, with more than one chunk, stage 2 adding the chunks' partials, each
/// thread a group's chunks / OTCRT_CUDA_COLUMN_ADD_GROUPS, as many at a
/// time. `bytes` is what stage 1
/// reads besides; `results` the bytes of the results.
void columnReduceLaunches(const DeviceModel &d, StringRef what, int64_t rows,
                          int64_t cols, int planes, int64_t unroll,
                          double bytes, double results,
                          SmallVectorImpl<KernelLaunch> &launches) {
  if (cols <= 0)
    return;
  int64_t tiles = 0, chunkRows = 0, chunks = 1;
  otcrt_column_plan(
      rows, cols, planes,
      static_cast<int64_t>(OTCRT_CUDA_REDUCTION_SCRATCH_BYTES / sizeof(float)),
      otcrt_column_target_blocks(d.sms), &tiles, &chunkRows, &chunks);
  double partials = 4.0 * static_cast<double>(chunks) * cols * planes;
  KernelLaunch one;
  one.what = what.str();
  one.blocks = tiles * chunks;
  one.threads = OTCRT_CUDA_COLUMN_TILE_LANES * OTCRT_CUDA_COLUMN_TILE_PHASES;
  int64_t perThread = ceilDiv(chunkRows, OTCRT_CUDA_COLUMN_TILE_PHASES);
  one.steps = perThread / unroll + perThread % unroll + 1;
  one.bytes = bytes + (chunks > 1 ? partials : results);
  launches.push_back(one);
  if (chunks <= 1)
    return;
  KernelLaunch two;
  two.what = (what + " (chunks added)").str();
  two.blocks = ceilDiv(cols, 32) * planes;
  two.threads = 32 * OTCRT_CUDA_COLUMN_ADD_GROUPS;
  int64_t perGroup = ceilDiv(chunks, OTCRT_CUDA_COLUMN_ADD_GROUPS);
  two.steps = perGroup / unroll + perGroup % unroll + 1;
  two.bytes = partials + results;
  launches.push_back(two);
}

/// A one-block kernel of OTCRT_CUDA_REDUCE_BLOCK threads over `rows` rows,
/// `stepsPerRow` dependent loads per row (cross_entropy.cu's sums).
KernelLaunch oneBlockKernel(StringRef what, int64_t rows, int64_t stepsPerRow,
                            double bytes) {
  KernelLaunch l;
  l.what = what.str();
  l.threads = OTCRT_CUDA_REDUCE_BLOCK;
  l.steps = ceilDiv(rows, OTCRT_CUDA_REDUCE_BLOCK) * stepsPerRow;
  l.bytes = bytes;
  return l;
}

/// Rows and row length of a normalization over the dimensions from `axis`.
std::pair<int64_t, int64_t> rowsOf(Value x, int64_t axis) {
  ArrayRef<int64_t> s = shapeOf(x);
  return {numElements(s.take_front(axis)), numElements(s.drop_front(axis))};
}

/// Whether a norm's row kernels run a warp per row (layer_norm.cu).
bool normWarpRows(int64_t cols) {
  return cols <= OTCRT_CUDA_NORM_WARP_MAX_COLS;
}

/// normFwdKernel (layer_norm.cu): a warp or a block per row; a layer norm
/// sweeps the row three times (sum, squared deviations, normalize and
/// write), an RMS norm twice.
void normForwardLaunches(const DeviceModel &d, Value x, int64_t axis, bool rms,
                         Value gamma, Value beta, Value y, Value mean,
                         Value rstd, SmallVectorImpl<KernelLaunch> &launches) {
  auto [rows, cols] = rowsOf(x, axis);
  double bytes = bytesOf(gamma) + bytesOf(beta) + bytesOf(y) +
                 (rms ? 0.0 : bytesOf(mean)) + bytesOf(rstd);
  launches.push_back(rowKernel(d, "rows", rows, cols, x, rms ? 2 : 3, bytes,
                               /*extraSteps=*/0, normWarpRows(cols)));
}

/// normBwd (layer_norm.cu): the parameter gradients first, a two-stage
/// column reduction of dy and x (columnReduceLaunches), then dx, a warp or
/// a block per row sweeping dy and x twice (the residual read in the second
/// sweep).
void normBackwardLaunches(const DeviceModel &d, Value dy, Value x, int64_t axis,
                          bool rms, Value gamma, Value residual, Value dx,
                          Value dgamma, Value dbeta,
                          SmallVectorImpl<KernelLaunch> &launches) {
  auto [rows, cols] = rowsOf(x, axis);
  double stats = (rms ? 4.0 : 8.0) * rows;
  double data = double(rows) * cols * elementBytes(x);
  bool bf16Packets = elementBytes(x) == 2 && packWidth(cols, x) > 1;
  columnReduceLaunches(d, "parameter gradients", rows, cols, /*planes=*/2,
                       bf16Packets ? OTCRT_CUDA_PARAM_GRAD_UNROLL_BF16_PACKETS
                                   : OTCRT_CUDA_PARAM_GRAD_UNROLL,
                       2 * data + stats, bytesOf(dgamma) + bytesOf(dbeta),
                       launches);
  KernelLaunch l = rowKernel(d, "rows", rows, cols, x, 2,
                             data + bytesOf(gamma) + stats + bytesOf(dx),
                             /*extraSteps=*/0, normWarpRows(cols));
  if (residual) {
    // The residual's packets are loaded in the second sweep, from memory.
    l.bytes += bytesOf(residual);
    l.steps += l.cachedSteps;
    l.cachedSteps = 0;
  }
  launches.push_back(l);
}

void launchesOf(LayerNormOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  normForwardLaunches(d, op.getInput(), op.getAxis(), /*rms=*/false,
                      op.getGamma(), op.getBeta(), op.getResult(), op.getMean(),
                      op.getRstd(), l);
}

void launchesOf(LayerNormGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  normBackwardLaunches(d, op.getGrad(), op.getInput(), op.getAxis(),
                       /*rms=*/false, op.getGamma(), op.getResidual(),
                       op.getDx(), op.getDgamma(), op.getDbeta(), l);
}

void launchesOf(RmsNormOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  normForwardLaunches(d, op.getInput(), op.getAxis(), /*rms=*/true,
                      op.getGamma(), Value(), op.getResult(), Value(),
                      op.getRstd(), l);
}

void launchesOf(RmsNormGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  normBackwardLaunches(d, op.getGrad(), op.getInput(), op.getAxis(),
                       /*rms=*/true, op.getGamma(), op.getResidual(),
                       op.getDx(), op.getDgamma(), Value(), l);
}

/// rope.cu: one launch, a thread per W pairs of the first R features of a
/// row (R the tables' last dimension; two packets) or per W copied features
/// (one packet), W a 16-byte packet of x's type where R / 2 and the row are
/// multiples of one, else 1; OTCRT_CUDA_ROW_BLOCK threads a block: it reads
/// x and writes the result once, and reads four table values a pair (the
/// tables, shared by every head and batch, from the cache: counted once).
void launchesOf(RopeOp op, const DeviceModel &,
                SmallVectorImpl<KernelLaunch> &l) {
  Value x = op.getInput();
  int64_t dim = shapeOf(x).back(), rot = shapeOf(op.getCos()).back();
  int64_t w = packWidth(dim, x);
  if ((rot / 2) % w != 0)
    w = 1;
  int64_t rows = numElements(shapeOf(x)) / std::max<int64_t>(1, dim);
  int64_t groups = rows * (rot / 2 / w + (dim - rot) / w);
  KernelLaunch k;
  k.what = op.getTransposed() ? "rope (transposed)" : "rope";
  k.blocks = std::max<int64_t>(1, ceilDiv(groups, OTCRT_CUDA_ROW_BLOCK));
  k.threads = OTCRT_CUDA_ROW_BLOCK;
  k.steps = 2;
  k.bytes = bytesOf(x) + bytesOf(op.getResult()) + bytesOf(op.getCos()) +
            bytesOf(op.getSin());
  l.push_back(k);
}

/// forward (cross_entropy.cu): rowLseKernel, one block per row sweeping it
/// once (running maximum and sum of exponentials), thread 0 then reading the
/// label and the logit it names; for a mean or sum, reduceLossKernel, one
/// block that reads each row's label, then its lse and logit.
void launchesOf(CrossEntropyOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  Value logits = op.getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  bool none = op.getReduction() == "none";
  double perRow = 8.0 + 4.0 + (none ? 4.0 : 0.0);
  l.push_back(rowKernel(d, "rows", rows, classes, logits, 1, perRow * rows,
                        /*extraSteps=*/2));
  if (!none)
    l.push_back(oneBlockKernel(
        "loss", rows, 2, (8.0 + 4.0 + elementBytes(logits)) * rows + 4.0));
}

/// backward (cross_entropy.cu): for a mean, countRowsKernel, one block
/// counting the rows that count; then gradKernel, one block per row that
/// reads the label, then the row's scale and lse, then sweeps the row once
/// (each logit read, then its gradient written).
void launchesOf(CrossEntropyGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  Value logits = op.getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  if (op.getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  l.push_back(rowKernel(d, "rows", rows, classes, logits, 1,
                        bytesOf(op.getResult()) + 12.0 * rows,
                        /*extraSteps=*/2));
}

/// fused (cross_entropy.cu): for a mean, countRowsKernel as the gradient's;
/// then fusedKernel, one block of OTCRT_CUDA_CE_FUSED_BLOCK threads per row
/// that reads the label, sweeps the row once from memory (the row kept in
/// classes x element bytes of shared memory when it fits
/// OTCRT_CUDA_CE_STAGED_ROW_BYTES, copied there asynchronously in 16-byte
/// packets; else OTCRT_CUDA_CE_FUSED_UNROLL packets in flight a thread), reads
/// the row's scale, then writes the gradient from shared memory (or from a
/// second sweep of memory, a packet at a time, when the row does not fit); for
/// a mean or sum, one block adding the rows' losses (then the count, for a
/// mean). The rows kernel of a fused loss call over `rows` rows of `classes`
/// logits of `data`'s type (see CrossEntropyWithGradOp below).
KernelLaunch fusedLossRows(int64_t rows, int64_t classes, Value data,
                           bool none) {
  double rowBytes = double(classes) * elementBytes(data);
  bool staged = rowBytes <= OTCRT_CUDA_CE_STAGED_ROW_BYTES;
  int64_t packets =
      ceilDiv(classes, OTCRT_CUDA_CE_FUSED_BLOCK * packWidth(classes, data));
  KernelLaunch k;
  k.what = "rows";
  k.blocks = rows;
  k.threads = OTCRT_CUDA_CE_FUSED_BLOCK;
  k.sharedBytes = staged ? static_cast<int64_t>(rowBytes) : 0;
  // The label, the first sweep (16-byte packets staged: one wait for all
  // the thread's asynchronous copies, then its packets from shared memory;
  // else groups of loads), the scale; the second sweep's loads from shared
  // memory, or from memory one at a time.
  bool copies = staged && packWidth(classes, data) > 1;
  k.steps = 2 + (copies ? 1 : ceilDiv(packets, OTCRT_CUDA_CE_FUSED_UNROLL)) +
            (staged ? 0 : packets);
  k.cachedSteps = staged ? (copies ? 2 : 1) * packets : 0;
  // The logits read (once staged, else twice), the gradient written over
  // them, and per row its label, row_loss and (none) dloss and loss.
  k.bytes = rows * rowBytes * (staged ? 2 : 3) +
            (8.0 + 4.0 + (none ? 8.0 : 0.0)) * rows;
  return k;
}

void launchesOf(CrossEntropyWithGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  Value logits = op.getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  bool none = op.getReduction() == "none";
  if (op.getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  l.push_back(fusedLossRows(rows, classes, logits, none));
  if (!none)
    l.push_back(oneBlockKernel("loss", rows, 1, 4.0 * rows + 12.0));
}

/// cross_entropy.cu's linearFused: checkLabelsKernel over all rows; for a
/// mean, countRowsKernel over all rows; per chunk, between its GEMMs
/// (getLibraryGemms), fusedKernel over the chunk's rows; then, for a mean or
/// sum, sumRowLossKernel over all.
void launchesOf(LinearCrossEntropyWithGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  int64_t rows = numElements(shapeOf(op.getLabels())),
          classes = op.getClasses();
  bool none = op.getReduction() == "none";
  if (rows > 0)
    l.push_back(oneBlockKernel("labels", rows, 1, 8.0 * rows));
  if (op.getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  for (auto [n, times] : lossChunks(rows, op.getChunkRows()))
    for (int64_t i = 0; i < times; ++i)
      l.push_back(fusedLossRows(n, classes, op.getChunk(), none));
  if (!none)
    l.push_back(oneBlockKernel("loss", rows, 1, 4.0 * rows + 12.0));
}

/// gather_grad.cu: the result cleared (a copy-engine memset, priced as a
/// store-only kernel over it; none when the call adds into `acc`, whose
/// picked rows the sums then read and write), the positions' rows written
/// and sorted by
/// CUB's radix sort (about four passes over 16 bytes a position), one block
/// per piece of 32 sorted positions adding its gradient rows in order
/// (kUnroll = 4 rows' loads at a time, the row across the threads), and the
/// pieces' crossing runs added (most blocks exit at once).
void launchesOf(GatherGradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  ArrayRef<int64_t> s = shapeOf(op.getResult());
  int64_t axis = op.getAxis();
  int64_t outer = numElements(s.take_front(axis));
  int64_t inner = numElements(s.drop_front(axis + 1));
  int64_t positions = numElements(shapeOf(op.getIndices()));
  double elem = elementBytes(op.getGrad());
  if (!op.getAcc()) {
    KernelLaunch clear;
    clear.what = "clear";
    clear.blocks = std::max<int64_t>(1, ceilDiv(numElements(s), 4 * 256));
    clear.threads = 256;
    clear.bytes = bytesOf(op.getResult());
    l.push_back(clear);
  }
  if (positions == 0)
    return;
  KernelLaunch sort;
  sort.what = "sort positions by row";
  sort.blocks = std::max<int64_t>(1, ceilDiv(positions, 256));
  sort.threads = 256;
  sort.steps = 4;
  sort.bytes = 4.0 * 16.0 * positions;
  l.push_back(sort);
  int64_t pieces = ceilDiv(positions, 32) * outer;
  // A 16-byte packet a thread where rows are made of whole packets.
  int64_t packet = static_cast<int64_t>(16 / elem);
  int64_t width = inner % packet == 0 ? packet : 1;
  KernelLaunch sum;
  sum.what = "sum sorted rows";
  sum.blocks = pieces;
  sum.threads = std::max<int64_t>(32, std::min<int64_t>(1024, inner / width));
  sum.steps = ceilDiv(32, 4) + 1;
  // The gradient rows read, the rows picked written (and read first when
  // adding into acc), the partial rows.
  sum.bytes =
      static_cast<double>(outer) * positions * inner * elem +
      static_cast<double>(op.getPickedRowBytes()) * (op.getAcc() ? 2 : 1) +
      static_cast<double>(pieces) * inner * 4.0;
  l.push_back(sum);
  KernelLaunch cross;
  cross.what = "runs across pieces";
  cross.blocks = pieces;
  cross.threads = sum.threads;
  cross.steps = 2;
  cross.bytes = static_cast<double>(pieces) * inner * 4.0 * 2;
  l.push_back(cross);
}

/// expert_matmul.cu's grouping of the rows by expert: each row's (expert,
/// row) pair written, CUB's stable radix sort of the pairs (about four
/// passes over 16 bytes a row, as the gather gradient's), and one thread
/// per expert finding where its rows begin.
void expertGroupingLaunches(int64_t rows, int64_t experts,
                            SmallVectorImpl<KernelLaunch> &l) {
  KernelLaunch keys;
  keys.what = "expert keys";
  keys.blocks = std::max<int64_t>(1, ceilDiv(rows, 256));
  keys.threads = 256;
  keys.bytes = 16.0 * rows;
  l.push_back(keys);
  KernelLaunch sort;
  sort.what = "sort rows by expert";
  sort.blocks = keys.blocks;
  sort.threads = 256;
  sort.steps = 4;
  sort.bytes = 4.0 * 16.0 * rows;
  l.push_back(sort);
  KernelLaunch bounds;
  bounds.what = "expert bounds";
  bounds.blocks = 1;
  bounds.threads = 256;
  bounds.steps = std::max<int64_t>(1, ceilDiv(experts + 1, 256) *
                                          (64 - __builtin_clzll(rows + 1)));
  bounds.bytes = 8.0 * (experts + 1);
  l.push_back(bounds);
}

void launchesOf(ExpertMatmulOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  expertGroupingLaunches(shapeOf(op.getX())[0], op.getExperts(), l);
}

void launchesOf(ExpertMatmulWgradOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  expertGroupingLaunches(shapeOf(op.getX())[0], shapeOf(op.getResult())[0], l);
}

/// column_sum.cu: a two-stage column reduction (columnReduceLaunches).
void launchesOf(ColumnSumOp op, const DeviceModel &d,
                SmallVectorImpl<KernelLaunch> &l) {
  ArrayRef<int64_t> s = shapeOf(op.getInput());
  int64_t rows = numElements(s.drop_back()), cols = s.back();
  columnReduceLaunches(d, "column sums", rows, cols, /*planes=*/1,
                       OTCRT_CUDA_COLUMN_SUM_UNROLL, bytesOf(op.getInput()),
                       bytesOf(op.getResult()), l);
}

//===----------------------------------------------------------------------===//
// The models
//===----------------------------------------------------------------------===//

/// The model of a library op whose launches launchesOf describes.
template <typename OpTy>
struct LibraryLaunches
    : GridLaunchOpInterface::ExternalModel<LibraryLaunches<OpTy>, OpTy> {
  void getGridLaunches(Operation *op, const DeviceModel &d,
                       SmallVectorImpl<KernelLaunch> &launches) const {
    launchesOf(cast<OpTy>(op), d, launches);
  }
};

/// Attention: cuDNN's SDPA, or the fallback kernels where it does not run,
/// both priced by their measured rates (Devices.cpp), so no grid; a
/// key-padding mask written out for cuDNN is staged, in BF16.
template <typename OpTy>
struct AttentionLaunches
    : GridLaunchOpInterface::ExternalModel<AttentionLaunches<OpTy>, OpTy> {
  void getGridLaunches(Operation *, const DeviceModel &,
                       SmallVectorImpl<KernelLaunch> &) const {}
  bool runsOnVendorLibrary(Operation *op) const {
    return cuda::attentionRunsOnCudnn(op);
  }
  int64_t getStagedBytes(Operation *op) const {
    return 2 * cuda::attentionMaskWrittenOut(op);
  }
};

/// A generated kernel: the OTC_LAUNCH the emitter prints.
struct GeneratedLaunch
    : GridLaunchOpInterface::ExternalModel<GeneratedLaunch, otck::KernelOp> {
  void getGridLaunches(Operation *op, const DeviceModel &,
                       SmallVectorImpl<KernelLaunch> &launches) const {
    launches.push_back(cuda::generatedLaunch(cast<otck::KernelOp>(op)));
  }
};

template <typename... Ops> void attachLibrary(MLIRContext &ctx) {
  (Ops::template attachInterface<LibraryLaunches<Ops>>(ctx), ...);
}

} // namespace

void cuda::attachLaunchModels(Dialect &dialect) {
  MLIRContext &ctx = *dialect.getContext();
  if (isa<OtcDialect>(dialect)) {
    attachLibrary<LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp,
                  RopeOp, CrossEntropyOp, CrossEntropyGradOp,
                  CrossEntropyWithGradOp, LinearCrossEntropyWithGradOp,
                  GatherGradOp, ExpertMatmulOp, ExpertMatmulWgradOp,
                  ColumnSumOp>(ctx);
    AttentionOp::attachInterface<AttentionLaunches<AttentionOp>>(ctx);
    AttentionGradOp::attachInterface<AttentionLaunches<AttentionGradOp>>(ctx);
  } else if (isa<otck::OtckDialect>(dialect)) {
    otck::KernelOp::attachInterface<GeneratedLaunch>(ctx);
  }
}
