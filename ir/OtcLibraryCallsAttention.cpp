//===- OtcLibraryCallsAttention.cpp - attention as kernel library calls ---===//
//
// The LibraryCallOpInterface methods of otc.attention and
// otc.attention_grad (see OtcLibraryCalls.cpp): the OtcrtAttention struct
// they pass, and q, k and v as three pointers or one packed buffer. Which
// calls run on cuDNN is the cuda target's rule (targets/cuda/Attention.cpp).
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

using namespace mlir;
using namespace otc;

/// The OtcrtAttention struct of an attention op or its gradient: sizes,
/// scale, causal, dropout, the key's buffer, the mask's strides, the layout,
/// the sliding window and the row stride of a packed q, k and v.
template <typename OpTy> static LibraryArg attentionStruct(OpTy op) {
  AttentionSizes s = attentionSizes(op);
  LibraryArg a;
  a.kind = LibraryArg::Struct;
  a.structType = "OtcrtAttention";
  for (int64_t n : {s.b, s.h, s.hk, s.t, s.s, s.d})
    a.fields.push_back(LibraryArg::integer(n));
  a.fields.push_back(LibraryArg::floating(op.getScale().convertToDouble()));
  a.fields.push_back(LibraryArg::integer(op.getCausal() ? 1 : 0));
  a.fields.push_back(LibraryArg::floating(op.getDropout().convertToDouble()));
  a.fields.push_back(LibraryArg::operand(op, op.getKey()));
  a.fields.push_back(LibraryArg::integer(static_cast<int64_t>(op.getStream())));
  SmallVector<int64_t> strides(4, 0);
  if (Value m = op.getMask())
    strides = broadcastStrides(cast<ShapedType>(m.getType()).getShape(),
                               {s.b, s.h, s.t, s.s});
  for (int64_t n : strides)
    a.fields.push_back(LibraryArg::integer(n));
  // Packed is [B, T, H, D] storage with longer rows.
  a.fields.push_back(LibraryArg::integer(
      op.getLayout() == "bhtd" ? 0 : /*OTCRT_LAYOUT_BTHD*/ 1));
  a.fields.push_back(LibraryArg::integer(op.getWindow()));
  a.fields.push_back(LibraryArg::integer(s.rowStride));
  a.fields.push_back(LibraryArg::floating(op.getSoftcap().convertToDouble()));
  // dS (the gradient op's fourth result) where the mask has a gradient,
  // key_padding, the sinks and their gradient (the gradient op's last
  // result): fields left out at the end initialize to NULL or 0, so each
  // is written only where it or a later one is set.
  bool dscores = false, dsinks = false;
  if constexpr (std::is_same_v<OpTy, AttentionGradOp>) {
    dscores = static_cast<bool>(op.getMaskGrad());
    dsinks = static_cast<bool>(op.getSinks());
  }
  bool sinks = static_cast<bool>(op.getSinks());
  if (dscores || op.getKeyPadding() || sinks)
    a.fields.push_back(dscores ? LibraryArg::result(3) : LibraryArg::null());
  if (op.getKeyPadding() || sinks)
    a.fields.push_back(LibraryArg::integer(op.getKeyPadding() ? 1 : 0));
  if (sinks)
    a.fields.push_back(LibraryArg::operand(op, op.getSinks()));
  if (dsinks)
    a.fields.push_back(
        LibraryArg::result(static_cast<unsigned>(op->getNumResults() - 1)));
  return a;
}

/// q, k and v (or dq, dk and dv) as three pointers: three buffers, or, packed,
/// one buffer at the heads where each starts in a row.
template <typename OpTy>
static void appendQkv(OpTy op, ArrayRef<LibraryArg> three,
                      SmallVectorImpl<LibraryArg> &args) {
  if (!op.isPacked()) {
    args.append(three.begin(), three.end());
    return;
  }
  AttentionSizes s = attentionSizes(op);
  for (int64_t heads : {int64_t(0), s.h, s.h + s.hk})
    args.push_back(three[0].at(heads * s.d));
}

std::string AttentionOp::getLibraryKernel() {
  return libraryKernelName("attention_fwd", getQ());
}

void AttentionOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  args.push_back(attentionStruct(*this));
  appendQkv(*this,
            {LibraryArg::operand(*this, getQ()),
             LibraryArg::operand(*this, getK()),
             LibraryArg::operand(*this, getV())},
            args);
  args.push_back(LibraryArg::operand(*this, getMask()));
  args.push_back(LibraryArg::result(0));
  args.push_back(LibraryArg::result(1));
}

std::string AttentionGradOp::getLibraryKernel() {
  return libraryKernelName("attention_bwd", getQ());
}

void AttentionGradOp::getLibraryArgs(SmallVectorImpl<LibraryArg> &args) {
  args.push_back(attentionStruct(*this));
  args.push_back(LibraryArg::operand(*this, getGrad()));
  appendQkv(*this,
            {LibraryArg::operand(*this, getQ()),
             LibraryArg::operand(*this, getK()),
             LibraryArg::operand(*this, getV())},
            args);
  for (Value v : {getMask(), getOutput(), getLse()})
    args.push_back(LibraryArg::operand(*this, v));
  if (isPacked())
    appendQkv(*this, {LibraryArg::result(0)}, args);
  else
    appendQkv(
        *this,
        {LibraryArg::result(0), LibraryArg::result(1), LibraryArg::result(2)},
        args);
}
