//===- OtcLibraryCalls.cpp - the fused ops as kernel library calls --------===//
//
// The LibraryCallOpInterface methods of the ops the runtime's kernel library
// computes: which function of runtime/include/otcrt/kernels.h an op calls
// (by the storage type of its data) and its arguments in the order that
// header declares them. Sizes come from the op's static shapes, options from
// its attributes; the emitters only print what these methods list.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

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

/// "otcrt_<name>_f32" or "_bf16" by the element type of `data`.
static std::string kernelName(StringRef name, Value data) {
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
  return kernelName("layer_norm_fwd", getInput());
}

void LayerNormOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  args.push_back(LibraryArg::floating(getEpsilon().convertToDouble()));
  for (Value v : {getInput(), getGamma(), getBeta()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 3; ++i)
    args.push_back(LibraryArg::result(i));
}

std::string LayerNormGradOp::getLibraryKernel() {
  return kernelName("layer_norm_bwd", getInput());
}

void LayerNormGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  for (Value v : {getGrad(), getInput(), getGamma(), getMean(), getRstd(),
                  getResidual()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 3; ++i)
    args.push_back(LibraryArg::result(i));
}

std::string RmsNormOp::getLibraryKernel() {
  return kernelName("rms_norm_fwd", getInput());
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
  return kernelName("rms_norm_bwd", getInput());
}

void RmsNormGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  appendRows(args, getInput(), getAxis());
  for (Value v : {getGrad(), getInput(), getGamma(), getRstd()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 2; ++i)
    args.push_back(LibraryArg::result(i));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The OtcrtAttention struct of an attention op or its gradient: sizes,
/// scale, causal, dropout, the key's buffer, the mask's strides, the layout
/// and the sliding window.
template <typename OpTy> static LibraryArg attentionStruct(OpTy op) {
  // Sizes in [B, H, T, D] terms whatever the storage layout.
  bool bthd = op.getLayout() == "bthd";
  SmallVector<int64_t> q(shapeOf(op.getQ())), k(shapeOf(op.getK()));
  if (bthd) {
    std::swap(q[1], q[2]);
    std::swap(k[1], k[2]);
  }
  LibraryArg a;
  a.kind = LibraryArg::Struct;
  a.structType = "OtcrtAttention";
  for (int64_t n : {q[0], q[1], k[1], q[2], k[2], q[3]})
    a.fields.push_back(LibraryArg::integer(n));
  a.fields.push_back(LibraryArg::floating(op.getScale().convertToDouble()));
  a.fields.push_back(LibraryArg::integer(op.getCausal() ? 1 : 0));
  a.fields.push_back(LibraryArg::floating(op.getDropout().convertToDouble()));
  a.fields.push_back(LibraryArg::operand(op, op.getKey()));
  a.fields.push_back(
      LibraryArg::integer(static_cast<int64_t>(op.getStream())));
  SmallVector<int64_t> strides(4, 0);
  if (Value m = op.getMask())
    strides = broadcastStrides(shapeOf(m), {q[0], q[1], q[2], k[2]});
  for (int64_t s : strides)
    a.fields.push_back(LibraryArg::integer(s));
  a.fields.push_back(
      LibraryArg::integer(bthd ? /*OTCRT_LAYOUT_BTHD*/ 1 : 0));
  a.fields.push_back(LibraryArg::integer(op.getWindow()));
  return a;
}

std::string AttentionOp::getLibraryKernel() {
  return kernelName("attention_fwd", getQ());
}

void AttentionOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  args.push_back(attentionStruct(*this));
  for (Value v : {getQ(), getK(), getV(), getMask()})
    args.push_back(LibraryArg::operand(*this, v));
  args.push_back(LibraryArg::result(0));
  args.push_back(LibraryArg::result(1));
}

std::string AttentionGradOp::getLibraryKernel() {
  return kernelName("attention_bwd", getQ());
}

void AttentionGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  args.push_back(attentionStruct(*this));
  for (Value v :
       {getGrad(), getQ(), getK(), getV(), getMask(), getOutput(), getLse()})
    args.push_back(LibraryArg::operand(*this, v));
  for (unsigned i = 0; i < 3; ++i)
    args.push_back(LibraryArg::result(i));
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
  return kernelName("cross_entropy_fwd", getLogits());
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
  return kernelName("cross_entropy_bwd", getLogits());
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

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

std::string GatherGradOp::getLibraryKernel() {
  return kernelName("gather_grad", getGrad());
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
  args.push_back(LibraryArg::result(0));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

std::string ColumnSumOp::getLibraryKernel() {
  return kernelName("column_sum", getInput());
}

void ColumnSumOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  ArrayRef<int64_t> s = shapeOf(getInput());
  args.push_back(LibraryArg::integer(numElements(s.drop_back())));
  args.push_back(LibraryArg::integer(s.back()));
  args.push_back(LibraryArg::operand(*this, getInput()));
  args.push_back(LibraryArg::result(0));
}
