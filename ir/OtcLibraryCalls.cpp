//===- OtcLibraryCalls.cpp - the fused ops as kernel library calls --------===//
//
// The LibraryCallOpInterface methods of the ops the runtime's kernel library
// computes: which function of runtime/include/otcrt/kernels.h an op calls
// (by the storage type of its data) and its arguments in the order that
// header declares them. Sizes come from the op's static shapes, options from
// its attributes; the emitters only print what these methods list. Each
// op's getLibraryLaunches describes the kernels its cuda call launches, read
// from that kernel's launch site in runtime/cuda/ (grid, block, the loop of
// one thread), for the step-time prediction.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

#include "otcrt/launch_config.h"
#include "otcrt/workspace.h"

using namespace mlir;
using namespace otc;

LibraryArg LibraryArg::operand(Operation *op, Value v) {
  if (!v)
    return null();
  for (OpOperand &use : op->getOpOperands())
    if (use.get() == v)
      return {Operand, 0, 0.0, use.getOperandNumber()};
  llvm_unreachable("not an operand of the op");
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

std::string otc::libraryKernelName(StringRef name, Value data) {
  Type t = getElementTypeOrSelf(data.getType());
  return ("otcrt_" + name + (t.isBF16() ? "_bf16" : "_f32")).str();
}

/// Rows and row length of a normalization over the dimensions from `axis`.
static void appendRows(SmallVectorImpl<LibraryArg> &args, Value x,
                       int64_t axis) {
  ArrayRef<int64_t> s = shapeOf(x);
  args.push_back(LibraryArg::integer(numElements(s.take_front(axis))));
  args.push_back(LibraryArg::integer(numElements(s.drop_front(axis))));
}

//===----------------------------------------------------------------------===//
// Launch shapes of the cuda kernels
//===----------------------------------------------------------------------===//

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Bytes of one element of `v`.
static int64_t elementBytes(Value v) {
  return storageBytes(getElementTypeOrSelf(v.getType()));
}

/// Elements a row kernel moves per access over rows of `cols` elements of
/// `v`'s type: a 16-byte packet when `cols` is a multiple of one (the
/// arena's buffers start 16-byte aligned), else one (common.cuh's
/// `packable`).
static int64_t packWidth(int64_t cols, Value v) {
  int64_t pack = OTCRT_CUDA_PACKET_BYTES / elementBytes(v);
  return pack > 0 && cols % pack == 0 ? pack : 1;
}

/// The packets one thread of a row kernel (one block of OTCRT_CUDA_ROW_BLOCK
/// threads per row) takes in one sweep over a row of `cols` elements.
static int64_t rowSweepSteps(int64_t cols, Value v) {
  return ceilDiv(cols, OTCRT_CUDA_ROW_BLOCK * packWidth(cols, v));
}

/// The largest row a row kernel reads again from its SM's L1 in a later
/// sweep: the share of one of the 8 row blocks an H100 SM holds (2048
/// threads / 256) in its 256 KB of L1 (whitepaper). A longer row's later
/// sweeps read memory again.
constexpr int64_t kL1RowBytes = 32 << 10;

/// A row kernel over `rows` rows of `cols` elements of `v` that sweeps each
/// row `sweeps` times (the first from memory, the later ones from L1 while
/// the row fits there) and moves `bytes` besides the first sweep's reads,
/// plus `extraSteps` dependent loads of its own (labels, statistics). With
/// `warpRows`, a warp per row (the norms' rows of at most
/// OTCRT_CUDA_NORM_WARP_MAX_COLS, layer_norm.cu): OTCRT_CUDA_NORM_WARP_ROWS
/// rows a block, a thread taking 8 times the packets, and 8 times the rows
/// sharing an SM's L1.
static KernelLaunch rowKernel(StringRef what, int64_t rows, int64_t cols,
                              Value v, int64_t sweeps, double bytes,
                              int64_t extraSteps = 0, bool warpRows = false) {
  KernelLaunch l;
  l.what = what.str();
  l.blocks = warpRows ? ceilDiv(rows, OTCRT_CUDA_NORM_WARP_ROWS) : rows;
  l.threads = OTCRT_CUDA_ROW_BLOCK;
  int64_t perSweep = warpRows ? ceilDiv(cols, 32 * packWidth(cols, v))
                              : rowSweepSteps(cols, v);
  double rowBytes = double(cols) * elementBytes(v);
  bool cached =
      rowBytes <= (warpRows ? kL1RowBytes / OTCRT_CUDA_NORM_WARP_ROWS
                            : kL1RowBytes);
  l.steps = perSweep * (cached ? 1 : sweeps) + extraSteps;
  l.cachedSteps = cached ? perSweep * (sweeps - 1) : 0;
  l.bytes = rows * rowBytes * (cached ? 1 : sweeps) + bytes;
  return l;
}

/// The two kernels of a column reduction of a [rows, cols] matrix of `v`
/// into `planes` results (column_reduce.cuh, cut by otcrt_column_plan):
/// stage 1, one block per (tile, chunk), each thread adding chunkRows /
/// phases rows of its columns `unroll` loads at a time (then one store),
/// and, with more than one chunk, stage 2 adding the chunks' partials, each
/// thread a group's chunks / OTCRT_CUDA_COLUMN_ADD_GROUPS, as many at a time. `bytes` is what stage 1
/// reads besides; `results` the bytes of the results.
static void columnReduceLaunches(StringRef what, int64_t rows, int64_t cols,
                                 int planes, int64_t unroll, double bytes,
                                 double results,
                                 SmallVectorImpl<KernelLaunch> &launches) {
  if (cols <= 0)
    return;
  int64_t tiles = 0, chunkRows = 0, chunks = 1;
  otcrt_column_plan(
      rows, cols, planes,
      static_cast<int64_t>(OTCRT_CUDA_REDUCTION_SCRATCH_BYTES / sizeof(float)),
      &tiles, &chunkRows, &chunks);
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
static KernelLaunch oneBlockKernel(StringRef what, int64_t rows,
                                   int64_t stepsPerRow, double bytes) {
  KernelLaunch l;
  l.what = what.str();
  l.threads = OTCRT_CUDA_REDUCE_BLOCK;
  l.steps = ceilDiv(rows, OTCRT_CUDA_REDUCE_BLOCK) * stepsPerRow;
  l.bytes = bytes;
  return l;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

std::string LayerNormOp::getLibraryKernel() {
  return libraryKernelName("layer_norm_fwd", getInput());
}

void LayerNormOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  args.push_back(LibraryArg::floating(getEpsilon().convertToDouble()));
  for (Value v : {getInput(), getGamma(), getBeta()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 3; ++i)
    args.push_back(LibraryArg::result(i));
}

/// Rows and row length of a normalization over the dimensions from `axis`.
static std::pair<int64_t, int64_t> rowsOf(Value x, int64_t axis) {
  ArrayRef<int64_t> s = shapeOf(x);
  return {numElements(s.take_front(axis)), numElements(s.drop_front(axis))};
}

/// Bytes of an optional operand or result (0 when absent).
static double bytesOf(Value v) { return v ? double(byteSize(v)) : 0.0; }

/// Whether a norm's row kernels run a warp per row (layer_norm.cu).
static bool normWarpRows(int64_t cols) {
  return cols <= OTCRT_CUDA_NORM_WARP_MAX_COLS;
}

/// normFwdKernel (layer_norm.cu): a warp or a block per row; a layer norm
/// sweeps the row three times (sum, squared deviations, normalize and
/// write), an RMS norm twice.
static void normForwardLaunches(Value x, int64_t axis, bool rms, Value gamma,
                                Value beta, Value y, Value mean, Value rstd,
                                SmallVectorImpl<KernelLaunch> &launches) {
  auto [rows, cols] = rowsOf(x, axis);
  double bytes = bytesOf(gamma) + bytesOf(beta) + bytesOf(y) +
                 (rms ? 0.0 : bytesOf(mean)) + bytesOf(rstd);
  launches.push_back(rowKernel("rows", rows, cols, x, rms ? 2 : 3, bytes,
                              /*extraSteps=*/0, normWarpRows(cols)));
}

/// normBwd (layer_norm.cu): the parameter gradients first, a two-stage
/// column reduction of dy and x (columnReduceLaunches), then dx, a warp or
/// a block per row sweeping dy and x twice (the residual read in the second sweep).
static void normBackwardLaunches(Value dy, Value x, int64_t axis, bool rms,
                                 Value gamma, Value residual, Value dx,
                                 Value dgamma, Value dbeta,
                                 SmallVectorImpl<KernelLaunch> &launches) {
  auto [rows, cols] = rowsOf(x, axis);
  double stats = (rms ? 4.0 : 8.0) * rows;
  double data = double(rows) * cols * elementBytes(x);
  bool bf16Packets = elementBytes(x) == 2 && packWidth(cols, x) > 1;
  columnReduceLaunches("parameter gradients", rows, cols, /*planes=*/2,
                       bf16Packets ? OTCRT_CUDA_PARAM_GRAD_UNROLL_BF16_PACKETS
                                   : OTCRT_CUDA_PARAM_GRAD_UNROLL,
                       2 * data + stats, bytesOf(dgamma) + bytesOf(dbeta),
                       launches);
  KernelLaunch l = rowKernel("rows", rows, cols, x, 2,
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

void LayerNormOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  normForwardLaunches(getInput(), getAxis(), /*rms=*/false, getGamma(),
                      getBeta(), getResult(), getMean(), getRstd(), l);
}

std::string LayerNormGradOp::getLibraryKernel() {
  return libraryKernelName("layer_norm_bwd", getInput());
}

void LayerNormGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  for (Value v : {getGrad(), getInput(), getGamma(), getMean(), getRstd(),
                  getResidual()})
    args.push_back(LibraryArg::operand(*this, v));
  args.push_back(
      LibraryArg::integer((getDgammaAcc() ? 1 : 0) | (getDbetaAcc() ? 2 : 0)));
  for (unsigned i = 0; i < 3; ++i)
    args.push_back(LibraryArg::result(i));
}

void LayerNormGradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getDgammaAcc())
    pairs.push_back({1, getDgammaAccMutable()[0].getOperandNumber()});
  if (getDbetaAcc())
    pairs.push_back({2, getDbetaAccMutable()[0].getOperandNumber()});
}

void LayerNormGradOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  normBackwardLaunches(getGrad(), getInput(), getAxis(), /*rms=*/false,
                       getGamma(), getResidual(), getDx(), getDgamma(),
                       getDbeta(), l);
}

std::string RmsNormOp::getLibraryKernel() {
  return libraryKernelName("rms_norm_fwd", getInput());
}

void RmsNormOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  args.push_back(LibraryArg::floating(getEpsilon().convertToDouble()));
  for (Value v : {getInput(), getGamma()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 2; ++i)
    args.push_back(LibraryArg::result(i));
}

void RmsNormOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  normForwardLaunches(getInput(), getAxis(), /*rms=*/true, getGamma(), Value(),
                      getResult(), Value(), getRstd(), l);
}

std::string RmsNormGradOp::getLibraryKernel() {
  return libraryKernelName("rms_norm_bwd", getInput());
}

void RmsNormGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  for (Value v : {getGrad(), getInput(), getGamma(), getRstd()})
    args.push_back(LibraryArg::operand(*this, v));
  args.push_back(LibraryArg::integer(getDgammaAcc() ? 1 : 0));
  for (unsigned i = 0; i < 2; ++i)
    args.push_back(LibraryArg::result(i));
}

void RmsNormGradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getDgammaAcc())
    pairs.push_back({1, getDgammaAccMutable()[0].getOperandNumber()});
}

void RmsNormGradOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  normBackwardLaunches(getGrad(), getInput(), getAxis(), /*rms=*/true,
                       getGamma(), Value(), getDx(), getDgamma(), Value(), l);
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// has_ignore, ignore_index and the reduction (OtcrtReduction).
static void appendLossOptions(SmallVectorImpl<LibraryArg> &args,
                              std::optional<int64_t> ignore,
                              StringRef reduction) {
  args.push_back(LibraryArg::integer(ignore ? 1 : 0));
  args.push_back(LibraryArg::integer(ignore.value_or(0)));
  args.push_back(LibraryArg::integer(reduction == "mean"  ? 0
                                     : reduction == "sum" ? 1
                                                          : 2));
}

std::string CrossEntropyOp::getLibraryKernel() {
  return libraryKernelName("cross_entropy_fwd", getLogits());
}

void CrossEntropyOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getLogits(), shapeOf(getLogits()).size() - 1);
  args.push_back(LibraryArg::operand(*this, getLogits()));
  args.push_back(LibraryArg::operand(*this, getLabels()));
  appendLossOptions(args, getIgnoreIndex(), getReduction());
  args.push_back(LibraryArg::result(0));
  args.push_back(LibraryArg::result(1));
}

/// forward (cross_entropy.cu): rowLseKernel, one block per row sweeping it
/// once (running maximum and sum of exponentials), thread 0 then reading the
/// label and the logit it names; for a mean or sum, reduceLossKernel, one
/// block that reads each row's label, then its lse and logit.
void CrossEntropyOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  Value logits = getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  bool none = getReduction() == "none";
  double perRow = 8.0 + 4.0 + (none ? 4.0 : 0.0);
  l.push_back(rowKernel("rows", rows, classes, logits, 1, perRow * rows,
                        /*extraSteps=*/2));
  if (!none)
    l.push_back(oneBlockKernel(
        "loss", rows, 2, (8.0 + 4.0 + elementBytes(logits)) * rows + 4.0));
}

std::string CrossEntropyGradOp::getLibraryKernel() {
  return libraryKernelName("cross_entropy_bwd", getLogits());
}

void CrossEntropyGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getLogits(), shapeOf(getLogits()).size() - 1);
  for (Value v : {getGrad(), getLogits(), getLabels(), getLse()})
    args.push_back(LibraryArg::operand(*this, v));
  appendLossOptions(args, getIgnoreIndex(), getReduction());
  args.push_back(LibraryArg::result(0));
}

/// backward (cross_entropy.cu): for a mean, countRowsKernel, one block
/// counting the rows that count; then gradKernel, one block per row that
/// reads the label, then the row's scale and lse, then sweeps the row once
/// (each logit read, then its gradient written).
void CrossEntropyGradOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  Value logits = getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  if (getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  l.push_back(rowKernel("rows", rows, classes, logits, 1,
                        bytesOf(getResult()) + 12.0 * rows,
                        /*extraSteps=*/2));
}

std::optional<unsigned> CrossEntropyGradOp::getInPlaceOperand() {
  return LibraryArg::operand(*this, getLogits()).index;
}

std::string CrossEntropyWithGradOp::getLibraryKernel() {
  return libraryKernelName("cross_entropy_fused", getLogits());
}

void CrossEntropyWithGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getLogits(), shapeOf(getLogits()).size() - 1);
  for (Value v : {getGrad(), getLogits(), getLabels()})
    args.push_back(LibraryArg::operand(*this, v));
  appendLossOptions(args, getIgnoreIndex(), getReduction());
  args.push_back(LibraryArg::result(1));
  args.push_back(LibraryArg::result(2));
  args.push_back(LibraryArg::result(0));
}

/// fused (cross_entropy.cu): for a mean, countRowsKernel as the gradient's;
/// then fusedKernel, one block of OTCRT_CUDA_CE_FUSED_BLOCK threads per row
/// that reads the label, sweeps the row once from memory (the row kept in
/// classes x element bytes of shared memory when it fits
/// OTCRT_CUDA_CE_STAGED_ROW_BYTES, copied there asynchronously in 16-byte
/// packets; else OTCRT_CUDA_CE_FUSED_UNROLL packets in flight a thread), reads the row's scale, then writes the
/// gradient from shared memory (or from a second sweep of memory, a packet
/// at a time, when the row does not fit); for a mean or sum, one block
/// adding the rows' losses (then the count, for a mean).
/// The rows kernel of a fused loss call over `rows` rows of `classes`
/// logits of `data`'s type (see CrossEntropyWithGradOp below).
static KernelLaunch fusedLossRows(int64_t rows, int64_t classes, Value data,
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

void CrossEntropyWithGradOp::getLibraryLaunches(
    SmallVectorImpl<KernelLaunch> &l) {
  Value logits = getLogits();
  auto [rows, classes] = rowsOf(logits, shapeOf(logits).size() - 1);
  bool none = getReduction() == "none";
  if (getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  l.push_back(fusedLossRows(rows, classes, logits, none));
  if (!none)
    l.push_back(oneBlockKernel("loss", rows, 1, 4.0 * rows + 12.0));
}

std::optional<unsigned> CrossEntropyWithGradOp::getInPlaceOperand() {
  return LibraryArg::operand(*this, getLogits()).index;
}

std::string LinearCrossEntropyWithGradOp::getLibraryKernel() {
  return libraryKernelName("linear_cross_entropy", getH());
}

void LinearCrossEntropyWithGradOp::getLibraryArgs(
    SmallVectorImpl<LibraryArg> &args) {
  ArrayRef<int64_t> w = shapeOf(getW());
  args.push_back(LibraryArg::integer(numElements(shapeOf(getLabels()))));
  args.push_back(LibraryArg::integer(w[1]));
  args.push_back(LibraryArg::integer(w[0]));
  args.push_back(LibraryArg::integer(getChunkRows()));
  for (Value v : {getGrad(), getH(), getW(), getLabels()})
    args.push_back(LibraryArg::operand(*this, v));
  appendLossOptions(args, getIgnoreIndex(), getReduction());
  // dw's OtcDType: OTC_F32 (0) or OTC_BF16 (5); whether it adds into dw.
  args.push_back(LibraryArg::integer(
      getElementTypeOrSelf(getDw().getType()).isBF16() ? 5 : 0));
  args.push_back(LibraryArg::integer(getDwAcc() ? 1 : 0));
  for (unsigned r : {2u, 3u, 0u, 1u, 4u}) // loss, row_loss, dh, dw, chunk
    args.push_back(LibraryArg::result(r));
}

/// The chunks' row counts: full chunks, then the rest.
static SmallVector<std::pair<int64_t, int64_t>, 2>
chunksOf(int64_t rows, int64_t chunk) {
  SmallVector<std::pair<int64_t, int64_t>, 2> c; // (rows, how many)
  if (rows / chunk)
    c.push_back({chunk, rows / chunk});
  if (rows % chunk)
    c.push_back({rows % chunk, 1});
  return c;
}

/// cross_entropy.cu's linearFused: checkLabelsKernel over all rows; for a
/// mean, countRowsKernel over all rows; per chunk, between its GEMMs (getLibraryGemms), fusedKernel over
/// the chunk's rows; then, for a mean or sum, sumRowLossKernel over all.
void LinearCrossEntropyWithGradOp::getLibraryLaunches(
    SmallVectorImpl<KernelLaunch> &l) {
  int64_t rows = numElements(shapeOf(getLabels())),
          classes = shapeOf(getW())[0];
  bool none = getReduction() == "none";
  if (rows > 0)
    l.push_back(oneBlockKernel("labels", rows, 1, 8.0 * rows));
  if (getReduction() == "mean")
    l.push_back(oneBlockKernel("count", rows, 1, 8.0 * rows + 8.0));
  for (auto [n, times] : chunksOf(rows, getChunkRows()))
    for (int64_t i = 0; i < times; ++i)
      l.push_back(fusedLossRows(n, classes, getChunk(), none));
  if (!none)
    l.push_back(oneBlockKernel("loss", rows, 1, 4.0 * rows + 12.0));
}

void LinearCrossEntropyWithGradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getDwAcc())
    pairs.push_back({1, getDwAccMutable()[0].getOperandNumber()});
}

/// Per chunk of n rows: the head (n x V x C), dh (n x C x V) and dw
/// (V x C x n, added to the earlier chunks' sum after the first, or to
/// dw_acc's from the first).
void LinearCrossEntropyWithGradOp::getLibraryGemms(
    SmallVectorImpl<LibraryGemm> &gemms) {
  ArrayRef<int64_t> w = shapeOf(getW());
  int64_t rows = numElements(shapeOf(getLabels())), v = w[0], c = w[1];
  bool bf16 = getElementTypeOrSelf(getH().getType()).isBF16();
  double e = bf16 ? 2 : 4;
  bool first = !getDwAcc();
  for (auto [n, times] : chunksOf(rows, getChunkRows()))
    for (int64_t i = 0; i < times; ++i) {
      double hBytes = n * c * e, wBytes = v * c * e, z = n * v * e;
      gemms.push_back({"head", n, v, c, bf16, hBytes + wBytes + z, e});
      gemms.push_back({"dh", n, c, v, bf16, z + wBytes + n * c * 4.0, 4});
      double dwElement = double(elementBytes(getDw())) * (first ? 1 : 2);
      gemms.push_back(
          {"dw", v, c, n, bf16, z + hBytes + v * c * dwElement, dwElement});
      first = false;
    }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

std::string GatherGradOp::getLibraryKernel() {
  return libraryKernelName("gather_grad", getGrad());
}

void GatherGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  ArrayRef<int64_t> s = shapeOf(getResult());
  int64_t axis = getAxis();
  args.push_back(LibraryArg::integer(numElements(s.take_front(axis))));
  args.push_back(LibraryArg::integer(s[axis]));
  args.push_back(LibraryArg::integer(numElements(s.drop_front(axis + 1))));
  args.push_back(LibraryArg::integer(numElements(shapeOf(getIndices()))));
  args.push_back(LibraryArg::operand(*this, getGrad()));
  args.push_back(LibraryArg::operand(*this, getIndices()));
  args.push_back(LibraryArg::integer(getAcc() ? 1 : 0));
  args.push_back(LibraryArg::result(0));
}

void GatherGradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getAcc())
    pairs.push_back({0, getAccMutable()[0].getOperandNumber()});
}

/// gather_grad.cu: the result cleared (a copy-engine memset, priced as a
/// store-only kernel over it; none when the call adds into `acc`, whose
/// picked rows the sums then read and write), the positions' rows written
/// and sorted by
/// CUB's radix sort (about four passes over 16 bytes a position), one block
/// per piece of 32 sorted positions adding its gradient rows in order
/// (kUnroll = 4 rows' loads at a time, the row across the threads), and the
/// pieces' crossing runs added (most blocks exit at once).
void GatherGradOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  ArrayRef<int64_t> s = shapeOf(getResult());
  int64_t axis = getAxis();
  int64_t outer = numElements(s.take_front(axis));
  int64_t inner = numElements(s.drop_front(axis + 1));
  int64_t positions = numElements(shapeOf(getIndices()));
  double elem = elementBytes(getGrad());
  if (!getAcc()) {
    KernelLaunch clear;
    clear.what = "clear";
    clear.blocks = std::max<int64_t>(1, ceilDiv(numElements(s), 4 * 256));
    clear.threads = 256;
    clear.bytes = bytesOf(getResult());
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
  sum.bytes = static_cast<double>(outer) * positions * inner * elem +
              static_cast<double>(getPickedRowBytes()) * (getAcc() ? 2 : 1) +
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

//===----------------------------------------------------------------------===//
// Expert products
//===----------------------------------------------------------------------===//

/// The sizes the expert-product calls share: rows, experts, depth (x's
/// row length), width (the product's row length) and the layout flag.
static void appendExpertSizes(SmallVectorImpl<LibraryArg> &args, Value x,
                              int64_t experts, int64_t width,
                              bool transposed) {
  ArrayRef<int64_t> xs = shapeOf(x);
  args.push_back(LibraryArg::integer(xs[0]));
  args.push_back(LibraryArg::integer(experts));
  args.push_back(LibraryArg::integer(xs[1]));
  args.push_back(LibraryArg::integer(width));
  args.push_back(LibraryArg::integer(transposed ? 1 : 0));
}

/// expert_matmul.cu's grouping of the rows by expert: each row's (expert,
/// row) pair written, CUB's stable radix sort of the pairs (about four
/// passes over 16 bytes a row, as the gather gradient's), and one thread
/// per expert finding where its rows begin.
static void expertGroupingLaunches(int64_t rows, int64_t experts,
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
  bounds.steps = std::max<int64_t>(
      1, ceilDiv(experts + 1, 256) * (64 - __builtin_clzll(rows + 1)));
  bounds.bytes = 8.0 * (experts + 1);
  l.push_back(bounds);
}

std::string ExpertMatmulOp::getLibraryKernel() {
  return libraryKernelName("expert_matmul", getX());
}

void ExpertMatmulOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendExpertSizes(args, getX(), getExperts(), getWidth(),
                    getTransposeRhs());
  args.push_back(LibraryArg::operand(*this, getX()));
  args.push_back(LibraryArg::operand(*this, getIds()));
  args.push_back(LibraryArg::operand(*this, getW()));
  args.push_back(LibraryArg::result(0));
}

void ExpertMatmulOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  expertGroupingLaunches(shapeOf(getX())[0], getExperts(), l);
}

/// The experts' products, priced as one GEMM of all the rows (each expert's
/// matrix read once, the rows gathered and the results scattered).
void ExpertMatmulOp::getLibraryGemms(SmallVectorImpl<LibraryGemm> &gemms) {
  int64_t n = shapeOf(getX())[0], k = getDepth(), o = getWidth();
  bool bf16 = getElementTypeOrSelf(getX().getType()).isBF16();
  double e = bf16 ? 2 : 4;
  gemms.push_back({"experts", n, o, k, bf16,
                   n * k * e + double(bytesOf(getW())) + n * o * 4.0, 4});
}

std::string ExpertMatmulWgradOp::getLibraryKernel() {
  return libraryKernelName("expert_matmul_wgrad", getX());
}

void ExpertMatmulWgradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendExpertSizes(args, getX(), shapeOf(getResult())[0],
                    shapeOf(getDy())[1], getTransposeRhs());
  args.push_back(LibraryArg::operand(*this, getDy()));
  args.push_back(LibraryArg::operand(*this, getX()));
  args.push_back(LibraryArg::operand(*this, getIds()));
  args.push_back(LibraryArg::result(0));
}

void ExpertMatmulWgradOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  expertGroupingLaunches(shapeOf(getX())[0], shapeOf(getResult())[0], l);
}

/// The experts' weight gradients, priced as one GEMM over all the rows
/// (depth x width x rows), every expert's result written.
void ExpertMatmulWgradOp::getLibraryGemms(SmallVectorImpl<LibraryGemm> &gemms) {
  int64_t n = shapeOf(getX())[0], k = shapeOf(getX())[1],
          o = shapeOf(getDy())[1];
  bool bf16 = getElementTypeOrSelf(getX().getType()).isBF16();
  double e = bf16 ? 2 : 4;
  gemms.push_back({"expert weights", k, o, n, bf16,
                   n * (k + o) * e + double(bytesOf(getResult())), 4});
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

std::string ColumnSumOp::getLibraryKernel() {
  return libraryKernelName(getAcc() ? "column_sum_into" : "column_sum",
                           getInput());
}

void ColumnSumOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getAcc())
    pairs.push_back({0, getAccMutable()[0].getOperandNumber()});
}

void ColumnSumOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  ArrayRef<int64_t> s = shapeOf(getInput());
  args.push_back(LibraryArg::integer(numElements(s.drop_back())));
  args.push_back(LibraryArg::integer(s.back()));
  args.push_back(LibraryArg::operand(*this, getInput()));
  args.push_back(LibraryArg::result(0));
}

/// column_sum.cu: a two-stage column reduction (columnReduceLaunches).
void ColumnSumOp::getLibraryLaunches(SmallVectorImpl<KernelLaunch> &l) {
  ArrayRef<int64_t> s = shapeOf(getInput());
  int64_t rows = numElements(s.drop_back()), cols = s.back();
  columnReduceLaunches("column sums", rows, cols, /*planes=*/1,
                       OTCRT_CUDA_COLUMN_SUM_UNROLL, bytesOf(getInput()),
                       bytesOf(getResult()), l);
}
