//===- RoundingOps.cpp - Clip, Softplus, Floor, Ceil and Mod
//---------------===//
//
// Ops the exports of 2026's architectures write, each as otc's primitives
// (compare, select, casts, exp, log), so that every target and the
// interpreter run them and constants fold at import:
//  - Clip (torch.clamp: GPT-OSS's experts, Mamba's time steps, Gemma 3n's
//    AltUp): x < lo ? lo : x, then > hi ? hi : that. Its gradient reaches x
//    where lo <= x <= hi, the bounds included, as torch.clamp's backward;
//    NaN stays NaN.
//  - Softplus (Mamba's, Jamba's and Qwen3-Next's time steps): max(x, 0) +
//    log1p(exp(-|x|)), the form that neither overflows nor loses the small
//    values; log1p(u) as log(w) u / (w - 1) with w = 1 + u (u where w
//    rounds to 1), which keeps log1p's relative precision.
//  - Floor and Ceil (Llama 4's attention temperature of positions): folded
//    for a constant; otherwise t = trunc(x) by casts to int64 and back,
//    less (or plus) one where x is below (above) it. No gradient, as
//    PyTorch's.
//  - Mod (floor_divide's remainder in Llama 4's chunked-attention mask):
//    folded for constants; otherwise a - b trunc(a / b), the sign of a
//    (fmod = 1), moved to the sign of b for integers with fmod = 0.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace otc {
namespace detail {

void Importer::importClip() {
  Value x = input(0);
  Value y = x;
  for (int i : {1, 2}) {
    if (!hasInput(i))
      continue;
    Value bound = input(i);
    if (elemOf(bound) != elemOf(x))
      nodeFail(std::string(i == 1 ? "min" : "max") + " has element type " +
               typeStr(bound.getType()) + ", the input " +
               typeStr(x.getType()));
    if (shapeOf(bound).size() > 0 && numElements(shapeOf(bound)) != 1)
      nodeFail(std::string(i == 1 ? "min" : "max") +
               " must be a scalar (a tensor of one element), got " +
               typeStr(bound.getType()));
    if (!shapeOf(bound).empty())
      bound = reshape(bound, {});
    Value beyond = builder.createOrFold<CompareOp>(
        currentLoc, tensorType(shapeOf(x), builder.getI1Type()), y, bound,
        builder.getStringAttr(i == 1 ? "lt" : "gt"));
    y = builder.createOrFold<SelectOp>(currentLoc, y.getType(), beyond, bound,
                                       y);
  }
  define(0, y);
}

/// log(1 + u) for u >= 0 that keeps its relative precision where 1 + u
/// rounds (Goldberg's form: log(w) u / (w - 1), w = 1 + u; u where w is 1).
Value Importer::log1p(Value u) {
  Value one = scalarLike(u, 1);
  Value w = binary<AddOp>(one, u);
  Value wm1 = binary<SubOp>(w, one);
  auto boolType = tensorType(shapeOf(u), builder.getI1Type());
  Value exact = builder.createOrFold<CompareOp>(
      currentLoc, boolType, wm1, scalarLike(u, 0), builder.getStringAttr("eq"));
  // Where w - 1 is 0, divide by 1 instead (that branch is not taken).
  Value den =
      builder.createOrFold<SelectOp>(currentLoc, u.getType(), exact, one, wm1);
  Value scaled = binary<DivOp>(
      binary<MulOp>(builder.createOrFold<LogOp>(currentLoc, w), u), den);
  return builder.createOrFold<SelectOp>(currentLoc, u.getType(), exact, u,
                                        scaled);
}

void Importer::importSoftplus() {
  Value x = requireFloat(input(0), "the input");
  auto boolType = tensorType(shapeOf(x), builder.getI1Type());
  Value zero = scalarLike(x, 0);
  Value neg = builder.createOrFold<CompareOp>(currentLoc, boolType, x, zero,
                                              builder.getStringAttr("lt"));
  // |x| and max(x, 0) as selects (their gradients PyTorch's away from 0).
  Value absX = builder.createOrFold<SelectOp>(currentLoc, x.getType(), neg,
                                              binary<SubOp>(zero, x), x);
  Value pos = builder.createOrFold<SelectOp>(currentLoc, x.getType(), neg,
                                             binary<MulOp>(x, zero), x);
  Value small =
      builder.createOrFold<ExpOp>(currentLoc, binary<SubOp>(zero, absX));
  define(0, binary<AddOp>(pos, log1p(small)));
}

/// trunc(x) of a float tensor: through int64 and back (exact for |x| <
/// 2^63; larger floats are integers already but overflow the cast).
Value Importer::truncFloat(Value x) {
  Value asInt = builder.createOrFold<CastOp>(
      currentLoc, tensorType(shapeOf(x), builder.getI64Type()), x);
  return builder.createOrFold<CastOp>(currentLoc, x.getType(), asInt);
}

void Importer::importFloorCeil() {
  bool isFloor = opType() == "Floor";
  Value x = requireFloat(input(0), "the input");
  DenseElementsAttr c;
  if (matchPattern(x, m_Constant(&c)) && elemOf(x).isF32()) {
    SmallVector<float> out;
    out.reserve(c.getNumElements());
    for (float v : c.getValues<float>())
      out.push_back(isFloor ? std::floor(v) : std::ceil(v));
    defineConstant(0,
                   DenseElementsAttr::get(c.getType(), ArrayRef<float>(out)));
    return;
  }
  Value t = truncFloat(x);
  Value off = builder.createOrFold<CompareOp>(
      currentLoc, tensorType(shapeOf(x), builder.getI1Type()), x, t,
      builder.getStringAttr(isFloor ? "lt" : "gt"));
  Value step = scalarLike(x, isFloor ? -1 : 1);
  define(0, builder.createOrFold<SelectOp>(currentLoc, x.getType(), off,
                                           binary<AddOp>(t, step), t));
}

void Importer::importMod() {
  Value a = input(0), b = input(1);
  if (elemOf(a) != elemOf(b))
    nodeFail("operand element types differ: " + typeStr(a.getType()) + " and " +
             typeStr(b.getType()));
  bool isFloat = isa<FloatType>(elemOf(a));
  int64_t fmod = attrInt("fmod", 0);
  if (isFloat && fmod != 1)
    nodeFail("fmod must be 1 for a float input (the ONNX specification)");
  auto shape = broadcastOrFail(shapeOf(a), shapeOf(b));
  // a - b trunc(a / b): the sign of a.
  Value q = binary<DivOp>(a, b);
  if (isFloat)
    q = truncFloat(q);
  Value r = binary<SubOp>(a, binary<MulOp>(b, q));
  if (!isFloat && fmod == 0) {
    // The sign of b: r + b where r is not 0 and its sign is not b's.
    auto boolType = tensorType(shape, builder.getI1Type());
    Value zero = scalarLike(a, 0);
    auto cmp = [&](Value l, Value rr, StringRef pred) {
      return builder.createOrFold<CompareOp>(
          currentLoc,
          tensorType(broadcastOrFail(shapeOf(l), shapeOf(rr)),
                     builder.getI1Type()),
          l, rr, builder.getStringAttr(pred));
    };
    Value rNeg = cmp(r, zero, "lt"), bNeg = cmp(b, zero, "lt");
    Value differ = cmp(rNeg, bNeg, "ne");
    Value nonzero = cmp(r, zero, "ne");
    // differ and nonzero, as a select (Importer::importLogic's And).
    Value fix = builder.createOrFold<SelectOp>(currentLoc, boolType, differ,
                                               nonzero, scalarLike(differ, 0));
    r = builder.createOrFold<SelectOp>(currentLoc, tensorType(shape, elemOf(a)),
                                       fix, binary<AddOp>(r, b), r);
  }
  define(0, r);
}

} // namespace detail
} // namespace otc
