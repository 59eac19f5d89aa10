//===- OtcLibraryCalls.cpp - the fused ops as kernel library calls --------===//
//
// The LibraryCallOpInterface methods of the ops the runtime's kernel library
// computes: which function of runtime/include/otcrt/kernels.h an op calls
// (by the storage type of its data) and its arguments in the order that
// header declares them. Sizes come from the op's static shapes, options from
// its attributes; the emitters only print what these methods list. What a
// call launches on a GPU (grids, blocks, the loop of one thread) is the
// cuda target's machine model (targets/cuda/LibraryLaunches.cpp), not this
// file's.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

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

/// Bytes of an optional operand or result (0 when absent).
static double bytesOf(Value v) { return v ? double(byteSize(v)) : 0.0; }

/// A result's OtcDType (otcrt/abi.h), as the calls that store FP32 sums
/// or round them to BF16 take it: OTC_F32 (0) or OTC_BF16 (5).
static LibraryArg storedType(Value v) {
  return LibraryArg::integer(getElementTypeOrSelf(v.getType()).isBF16() ? 5
                                                                        : 0);
}

/// Bytes of an element of `v`.
static double elementBytes(Value v) {
  return double(storageBytes(getElementTypeOrSelf(v.getType())));
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

std::string RmsNormGradOp::getLibraryKernel() {
  return libraryKernelName("rms_norm_bwd", getInput());
}

void RmsNormGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  for (Value v : {getGrad(), getInput(), getGamma(), getRstd(), getResidual()})
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

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

std::string RopeOp::getLibraryKernel() {
  return libraryKernelName("rope", getInput());
}

/// The input as [n0, n1, n2, D] (leading 1s), the rotary width R (the
/// tables' last dimension), the tables' element strides of n0, n1 and n2
/// (0 where they broadcast), the operands, `transposed`, `interleaved`.
void RopeOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  SmallVector<int64_t, 4> xs(shapeOf(getInput())), ts(shapeOf(getCos()));
  while (xs.size() < 4)
    xs.insert(xs.begin(), 1);
  while (ts.size() < 4)
    ts.insert(ts.begin(), 1);
  int64_t strides[4], stride = 1;
  for (int i = 3; i >= 0; --i) {
    strides[i] = ts[i] == 1 ? 0 : stride;
    stride *= ts[i];
  }
  for (int64_t n : xs)
    args.push_back(LibraryArg::integer(n));
  args.push_back(LibraryArg::integer(ts[3]));
  for (int i = 0; i < 3; ++i)
    args.push_back(LibraryArg::integer(strides[i]));
  for (Value v : {getInput(), getCos(), getSin()})
    args.push_back(LibraryArg::operand(*this, v));
  args.push_back(LibraryArg::integer(getTransposed() ? 1 : 0));
  args.push_back(LibraryArg::integer(getInterleaved() ? 1 : 0));
  args.push_back(LibraryArg::result(0));
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

std::optional<unsigned> CrossEntropyWithGradOp::getInPlaceOperand() {
  return LibraryArg::operand(*this, getLogits()).index;
}

std::string LinearCrossEntropyWithGradOp::getLibraryKernel() {
  return libraryKernelName("linear_cross_entropy", getH());
}

void LinearCrossEntropyWithGradOp::getLibraryArgs(
    SmallVectorImpl<LibraryArg> &args) {
  args.push_back(LibraryArg::integer(numElements(shapeOf(getLabels()))));
  args.push_back(LibraryArg::integer(getHidden()));
  args.push_back(LibraryArg::integer(getClasses()));
  args.push_back(LibraryArg::integer(getChunkRows()));
  for (Value v : {getGrad(), getH(), getW()})
    args.push_back(LibraryArg::operand(*this, v));
  // OtcrtHeadLayout: OTCRT_W_CLASSES_HIDDEN 0, OTCRT_W_HIDDEN_CLASSES 1.
  args.push_back(LibraryArg::integer(getWByHidden() ? 1 : 0));
  args.push_back(LibraryArg::operand(*this, getLabels()));
  appendLossOptions(args, getIgnoreIndex(), getReduction());
  // dw's OtcDType; whether it adds into dw.
  args.push_back(storedType(getDw()));
  args.push_back(LibraryArg::integer(getDwAcc() ? 1 : 0));
  args.push_back(LibraryArg::operand(*this, getBias())); // NULL: none
  for (unsigned r : {2u, 3u, 0u, 1u}) // loss, row_loss, dh, dw
    args.push_back(LibraryArg::result(r));
  args.push_back(getDbias() ? LibraryArg::result(5) : LibraryArg::null());
  args.push_back(LibraryArg::result(4)); // chunk
}

SmallVector<std::pair<int64_t, int64_t>, 2> otc::lossChunks(int64_t rows,
                                                            int64_t chunk) {
  SmallVector<std::pair<int64_t, int64_t>, 2> c; // (rows, how many)
  if (rows / chunk)
    c.push_back({chunk, rows / chunk});
  if (rows % chunk)
    c.push_back({rows % chunk, 1});
  return c;
}

void LinearCrossEntropyWithGradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getDwAcc())
    pairs.push_back({1, getDwAccMutable()[0].getOperandNumber()});
}

/// Per chunk of n rows: the head (n x V x C, reading the bias where there is
/// one), dh (n x C x V) and dw (V x C x n, added to the earlier chunks' sum
/// after the first, or to dw_acc's from the first; summing dlogits' columns
/// into dbias beside it where there is one).
void LinearCrossEntropyWithGradOp::getLibraryGemms(
    SmallVectorImpl<LibraryGemm> &gemms) {
  int64_t rows = numElements(shapeOf(getLabels())), v = getClasses(),
          c = getHidden();
  bool bf16 = getElementTypeOrSelf(getH().getType()).isBF16();
  double e = bf16 ? 2 : 4;
  bool first = !getDwAcc();
  for (auto [n, times] : lossChunks(rows, getChunkRows()))
    for (int64_t i = 0; i < times; ++i) {
      double hBytes = n * c * e, wBytes = v * c * e, z = n * v * e;
      double biasBytes = getBias() ? v * e : 0;
      double dbiasBytes = getDbias() ? v * 4.0 * (first ? 1 : 2) : 0;
      gemms.push_back(
          {"head", n, v, c, bf16, hBytes + wBytes + biasBytes + z, e});
      gemms.push_back({"dh", n, c, v, bf16, z + wBytes + n * c * 4.0, 4});
      double dwElement = elementBytes(getDw()) * (first ? 1 : 2);
      gemms.push_back({"dw", v, c, n, bf16,
                       z + hBytes + v * c * dwElement + dbiasBytes, dwElement});
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

std::string ExpertMatmulOp::getLibraryKernel() {
  return libraryKernelName("expert_matmul", getX());
}

void ExpertMatmulOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendExpertSizes(args, getX(), getExperts(), getWidth(),
                    getTransposeRhs());
  args.push_back(LibraryArg::operand(*this, getX()));
  args.push_back(LibraryArg::operand(*this, getIds()));
  args.push_back(LibraryArg::operand(*this, getW()));
  args.push_back(storedType(getResult()));
  args.push_back(LibraryArg::result(0));
}

/// The experts' products, priced as one GEMM of all the rows (each expert's
/// matrix read once, the rows gathered and the results scattered, in the
/// result's type: FP32, or rounded to BF16), by the runtime's own kernels.
void ExpertMatmulOp::getLibraryGemms(SmallVectorImpl<LibraryGemm> &gemms) {
  int64_t n = shapeOf(getX())[0], k = getDepth(), o = getWidth();
  bool bf16 = getElementTypeOrSelf(getX().getType()).isBF16();
  double e = bf16 ? 2 : 4, out = elementBytes(getResult());
  gemms.push_back({"experts", n, o, k, bf16,
                   n * k * e + double(bytesOf(getW())) + n * o * out, out,
                   /*ownKernel=*/true});
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
  args.push_back(storedType(getResult()));
  args.push_back(LibraryArg::integer(getAcc() ? 1 : 0));
  args.push_back(LibraryArg::result(0));
}

void ExpertMatmulWgradOp::getAccumulatedResults(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &pairs) {
  if (getAcc())
    pairs.push_back({0, getAccMutable()[0].getOperandNumber()});
}

/// The experts' weight gradients, priced as one GEMM over all the rows
/// (depth x width x rows), every expert's result written in its type, and
/// read first when the call adds into `acc`.
void ExpertMatmulWgradOp::getLibraryGemms(SmallVectorImpl<LibraryGemm> &gemms) {
  int64_t n = shapeOf(getX())[0], k = shapeOf(getX())[1],
          o = shapeOf(getDy())[1];
  bool bf16 = getElementTypeOrSelf(getX().getType()).isBF16();
  double e = bf16 ? 2 : 4;
  double out = elementBytes(getResult()) * (getAcc() ? 2 : 1);
  gemms.push_back(
      {"expert weights", k, o, n, bf16,
       n * (k + o) * e + double(numElements(shapeOf(getResult()))) * out, out,
       /*ownKernel=*/true});
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
