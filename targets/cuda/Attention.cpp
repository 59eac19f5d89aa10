//===- Attention.cpp - which attention calls run on cuDNN ----------------===//
//
// The cuda runtime's dispatch of otc.attention and otc.attention_grad
// (runtime/cuda/attention_dispatch.cpp): cuDNN's SDPA where it takes the
// call (attention sinks too: the forward's as cuDNN's sink token), the
// kernel library's own kernels otherwise, the key padding it gives cuDNN as
// per-sequence lengths (key_padding, with or without a sliding window: the
// runtime sets the rows that see no key after cuDNN), and the mask broadcast
// over the queries it writes out for cuDNN otherwise. The memory accounting
// (Memory.cpp: cuDNN's workspaces) and the step-time model (through
// GridLaunchOpInterface, LibraryLaunches.cpp) read this one rule.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "targets/cuda/Launches.h"

using namespace mlir;
using namespace otc;

namespace {

/// What decides where an attention call runs (attentionRunsOnCudnn).
template <typename OpTy> bool runsOnCudnn(OpTy op) {
  auto q = cast<ShapedType>(op.getQ().getType());
  int64_t d = q.getShape().back();
  // Soft-capped scores and the scores' gradient dS (the backward of a mask
  // with a gradient; its forward is a plain masked attention) run on the
  // kernel library's own kernels: the runtime's cuDNN graphs compute
  // neither.
  bool scoresGrad = isa<AttentionGradOp>(op.getOperation()) && op.getMaskGrad();
  if (!q.getElementType().isBF16() || op.getDropout().convertToDouble() != 0 ||
      d % 8 != 0 || d > 256 || op.getSoftcap().convertToDouble() != 0 ||
      scoresGrad)
    return false;
  // Sinks: the forward gives cuDNN a sink token, which it refuses with one
  // query (and before cuDNN 9.13, which the runtime finds out); the
  // backward's graph has none (the sinks' gradient is a kernel of the
  // library's after it), so any backward with sinks may run there.
  if (isa<AttentionOp>(op.getOperation()) && op.getSinks() &&
      attentionSizes(op).t == 1)
    return false;
  Value mask = op.getMask();
  // No mask tensor, or a key padding given to cuDNN as per-sequence lengths
  // (key_padding, under a sliding window too): no bias to read.
  if (!mask || op.getKeyPadding())
    return true;
  // The mask's stride along the keys must be 1: its last dimension is the
  // keys' own, not broadcast. One the runtime reads as it is (not broadcast
  // over the queries: attentionMaskWrittenOut) must have rows that start
  // 16-byte aligned: strides of multiples of 8 elements.
  ArrayRef<int64_t> m = cast<ShapedType>(mask.getType()).getShape();
  AttentionSizes a = attentionSizes(op);
  if (m.empty() || m.back() != a.s || a.s == 1)
    return false;
  SmallVector<int64_t> strides = broadcastStrides(m, {a.b, a.h, a.t, a.s});
  if (strides[2] == 0 && a.t > 1)
    return true;
  return llvm::all_of(ArrayRef<int64_t>(strides).take_front(3),
                      [](int64_t n) { return n % 8 == 0; });
}

} // namespace

bool cuda::attentionRunsOnCudnn(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return runsOnCudnn(a);
  if (auto g = dyn_cast<AttentionGradOp>(op))
    return runsOnCudnn(g);
  return false;
}

bool cuda::attentionKeyPaddingAsLengths(Operation *op) {
  // With or without a sliding window (runtime/cuda/attention_cudnn.cpp,
  // keyPadding).
  bool padding = isa<AttentionOp>(op)
                     ? cast<AttentionOp>(op).getKeyPadding()
                     : cast<AttentionGradOp>(op).getKeyPadding();
  return padding && attentionRunsOnCudnn(op);
}

int64_t cuda::attentionMaskWrittenOut(Operation *op) {
  Value mask = isa<AttentionOp>(op) ? cast<AttentionOp>(op).getMask()
                                    : cast<AttentionGradOp>(op).getMask();
  if (!mask || !attentionRunsOnCudnn(op) || attentionKeyPaddingAsLengths(op))
    return 0;
  AttentionSizes a = attentionSizes(op);
  SmallVector<int64_t> strides = broadcastStrides(
      cast<ShapedType>(mask.getType()).getShape(), {a.b, a.h, a.t, a.s});
  if (strides[2] != 0 || a.t <= 1)
    return 0;
  // Over the heads too, rows padded to 8 elements (runtime/cuda/attention.h,
  // maskOverQueries).
  return (strides[0] ? a.b : 1) * a.h * a.t * ((a.s + 7) / 8 * 8);
}
