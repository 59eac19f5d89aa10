//===- Opset23Ops.cpp - Attention, RMSNormalization, RotaryEmbedding ------===//
//
// The transformer ops ONNX added at opset 23, imported as the primitive ops
// the rest of the importer writes for their older spellings: RMSNormalization
// as the mean of squares, square root and scale that otc-fuse-patterns turns
// into otc.rms_norm; Attention as scale * Q Kᵀ, its masks, softmax and the
// product with V, in the form the attention recognizer turns into
// otc.attention (causal flag, grouped-query heads, additive mask); and
// RotaryEmbedding as slices, products and a concatenation. So a model means
// the same to the interpreter, to both code generators and with fusion off,
// and the fused ops come from one place.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace otc {
namespace detail {

namespace {

/// Shape `s` permuted by `perm`.
SmallVector<int64_t> permuted(ArrayRef<int64_t> s, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(s[p]);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// RMSNormalization
//===----------------------------------------------------------------------===//

void Importer::importRmsNorm() {
  Value x = requireFloat(input(0), "X");
  Value scale = requireFloat(input(1), "scale");
  ArrayRef<int64_t> in = shapeOf(x);
  double eps = widenFloat(attrFloat("epsilon", 1e-5f));
  int64_t n = 1;
  SmallVector<int64_t> axes = normalizedAxes(in, n);
  if (n == 0)
    nodeFail("normalizes over zero elements (X " + shapeStr(in) + ")");
  Value meanSquare =
      binary<MulOp>(reduceSum(binary<MulOp>(x, x), axes, true),
                    scalarF32(1.0 / static_cast<double>(n)));
  Value rms = builder.createOrFold<SqrtOp>(
      currentLoc, binary<AddOp>(meanSquare, scalarF32(eps)));
  Value inv = builder.createOrFold<ReciprocalOp>(currentLoc, rms);
  Value y = binary<MulOp>(binary<MulOp>(x, inv), scale);
  if (shapeOf(y) != in)
    nodeFail("scale " + shapeStr(shapeOf(scale)) + " does not broadcast to X " +
             shapeStr(in));
  define(0, y);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

Value Importer::transposeTo(Value x, ArrayRef<int64_t> perm) {
  return builder.createOrFold<TransposeOp>(
      currentLoc, tensorType(permuted(shapeOf(x), perm), elemOf(x)), x, perm);
}

void Importer::checkAttentionNode() {
  for (int i = 1; i < current->proto->output_size(); ++i)
    if (outputUsed(i))
      nodeFail("output " + Twine(i) +
               " (the key/value cache or the scores) is read; otc imports "
               "Attention's output Y only");
  if (getOptional(4) || getOptional(5))
    nodeFail("past_key/past_value (a key/value cache, for inference) are not "
             "supported");
  if (attrInt("qk_matmul_output_mode", 0) != 0)
    nodeFail("qk_matmul_output_mode " +
             Twine(attrInt("qk_matmul_output_mode", 0)) +
             " is not supported (only the scores output uses it)");
}

std::array<Value, 3> Importer::attentionHeads(Value q, Value k, Value v) {
  int64_t rank = shapeOf(q).size();
  if (rank != 3 && rank != 4)
    nodeFail("Q must be 3-D [B, T, H*D] or 4-D [B, H, T, D], got " +
             shapeStr(shapeOf(q)));
  if (static_cast<int64_t>(shapeOf(k).size()) != rank ||
      static_cast<int64_t>(shapeOf(v).size()) != rank)
    nodeFail("Q, K and V must have the same rank, got " + shapeStr(shapeOf(q)) +
             ", " + shapeStr(shapeOf(k)) + " and " + shapeStr(shapeOf(v)));
  // 3-D inputs: [B, T, H*D] split into heads and moved to [B, H, T, D].
  if (rank == 3) {
    int64_t hq = attrInt("q_num_heads", 0), hkv = attrInt("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0)
      nodeFail("3-D Q, K, V need q_num_heads and kv_num_heads");
    auto split = [&](Value t, int64_t heads, const char *what) {
      ArrayRef<int64_t> s = shapeOf(t);
      if (s[2] % heads)
        nodeFail(Twine(what) + " " + shapeStr(s) + ": " + Twine(s[2]) +
                 " is not a multiple of " + Twine(heads) + " heads");
      return transposeTo(reshape(t, {s[0], s[1], heads, s[2] / heads}),
                         {0, 2, 1, 3});
    };
    q = split(q, hq, "Q");
    k = split(k, hkv, "K");
    v = split(v, hkv, "V");
  }
  ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t b = qs[0], h = qs[1], d = qs[3], hk = ks[1], s = ks[2];
  if (ks[0] != b || vs[0] != b || ks[3] != d || vs[1] != hk || vs[2] != s ||
      hk <= 0 || h % hk)
    nodeFail("expects Q [B, H, T, D], K [B, Hk, S, D] and V [B, Hk, S, Dv] "
             "with Hk dividing H, got " +
             shapeStr(qs) + ", " + shapeStr(ks) + " and " + shapeStr(vs));
  // Grouped-query heads: K and V repeated to H heads as exporters write it
  // (unsqueeze, expand, reshape), which the recognizer reads unrepeated.
  auto repeatHeads = [&](Value x) {
    if (hk == h)
      return x;
    ArrayRef<int64_t> xs = shapeOf(x);
    Value e = broadcastTo(reshape(x, {b, hk, 1, xs[2], xs[3]}),
                          {b, hk, h / hk, xs[2], xs[3]});
    return reshape(e, {b, h, xs[2], xs[3]});
  };
  return {q, repeatHeads(k), repeatHeads(v)};
}

Value Importer::maskedScores(Value scores, Value mask) {
  ArrayRef<int64_t> ss = shapeOf(scores);
  int64_t t = ss[2], s = ss[3];
  Type f32 = builder.getF32Type();
  Value negInf = scalarF32(-std::numeric_limits<double>::infinity());
  // The causal select first and the mask added to it, as Hugging Face
  // writes `where(causal, scores, min) + attention_mask`: the form the
  // recognizer reads as the causal flag plus a mask operand.
  if (attrInt("is_causal", 0) != 0) {
    // Key j hidden from query i when j > i (the upper-left alignment).
    SmallVector<bool> keep(static_cast<size_t>(t * s));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < s; ++j)
        keep[i * s + j] = j <= i;
    auto bt = tensorType({t, s}, builder.getI1Type());
    Value tri = builder.create<ConstantOp>(
        currentLoc, DenseElementsAttr::get(bt, ArrayRef<bool>(keep)));
    scores = builder.createOrFold<SelectOp>(currentLoc, tensorType(ss, f32),
                                            tri, scores, negInf);
  }
  if (!mask)
    return scores;
  ArrayRef<int64_t> ms = shapeOf(mask);
  auto bc = broadcastShapes(ms, ss);
  if (!bc || ArrayRef<int64_t>(*bc) != ss)
    nodeFail("attn_mask " + shapeStr(ms) +
             " does not broadcast to the "
             "scores " +
             shapeStr(ss));
  if (elemOf(mask).isInteger(1)) {
    // True: the key takes part; as an additive mask of 0 and -inf.
    mask = builder.createOrFold<SelectOp>(currentLoc, tensorType(ms, f32), mask,
                                          scalarF32(0.0), negInf);
  } else {
    requireFloat(mask, "attn_mask");
  }
  return binary<AddOp>(scores, mask);
}

void Importer::importAttention() {
  checkAttentionNode();
  Value q = requireFloat(input(0), "Q"), k = requireFloat(input(1), "K"),
        v = requireFloat(input(2), "V");
  Value mask = getOptional(3);
  const int64_t rank = shapeOf(q).size();
  std::array<Value, 3> heads = attentionHeads(q, k, v);
  q = heads[0];
  k = heads[1];
  v = heads[2];
  ArrayRef<int64_t> qs = shapeOf(q);
  int64_t b = qs[0], h = qs[1], t = qs[2], d = qs[3], s = shapeOf(k)[2],
          dv = shapeOf(v)[3];
  float scaleAttr = attrFloat("scale", 0.0f);
  double scale = scaleAttr != 0.0f ? widenFloat(scaleAttr)
                                   : 1.0 / std::sqrt(static_cast<double>(d));
  Type f32 = builder.getF32Type();
  Value scores = builder.createOrFold<MatMulOp>(
      currentLoc, tensorType({b, h, t, s}, f32), q, k, false, true);
  scores = binary<MulOp>(scores, scalarF32(scale));
  // Soft-capping (c tanh(s / c)) comes before the masks.
  if (float cap = attrFloat("softcap", 0.0f); cap != 0.0f) {
    Value c = scalarF32(widenFloat(cap));
    scores = binary<MulOp>(
        builder.createOrFold<TanhOp>(currentLoc, binary<DivOp>(scores, c)), c);
  }
  scores = maskedScores(scores, mask);
  Value probs = builder.create<SoftmaxOp>(currentLoc, scores.getType(), scores,
                                         builder.getI64IntegerAttr(3));
  Value y = builder.createOrFold<MatMulOp>(
      currentLoc, tensorType({b, h, t, dv}, f32), probs, v);
  if (rank == 3)
    y = reshape(transposeTo(y, {0, 2, 1, 3}), {b, t, h * dv});
  define(0, y);
}

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

void Importer::importRotaryEmbedding() {
  Value x = requireFloat(input(0), "X");
  Value cosCache = requireFloat(input(1), "cos_cache");
  Value sinCache = requireFloat(input(2), "sin_cache");
  Value positions = getOptional(3);
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t rank = xs.size();
  if (rank != 3 && rank != 4)
    nodeFail("X must be 3-D [B, S, H*D] or 4-D [B, H, S, D], got " +
             shapeStr(xs));
  // To [B, S, H, D].
  Value y = x;
  if (rank == 4) {
    y = transposeTo(x, {0, 2, 1, 3});
  } else {
    int64_t heads = attrInt("num_heads", 0);
    if (heads <= 0 || xs[2] % heads)
      nodeFail("3-D X " + shapeStr(xs) + " needs num_heads dividing " +
               Twine(xs[2]));
    y = reshape(x, {xs[0], xs[1], heads, xs[2] / heads});
  }
  SmallVector<int64_t> ys(shapeOf(y));
  int64_t b = ys[0], seq = ys[1], heads = ys[2], d = ys[3];
  int64_t rot = attrInt("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = d;
  if (rot < 0 || rot > d || rot % 2)
    nodeFail("rotary_embedding_dim " + Twine(rot) +
             " must be even and at most the head size " + Twine(d));
  int64_t half = rot / 2;
  // The caches by position: [B, S, rot/2].
  auto lookup = [&](Value cache, const char *what) {
    ArrayRef<int64_t> cs = shapeOf(cache);
    if (positions) {
      requireInt(positions, "position_ids");
      if (cs.size() != 2 || cs[1] != half)
        nodeFail(Twine(what) + " " + shapeStr(cs) + " must be [positions, " +
                 Twine(half) + "] with position_ids");
      if (shapeOf(positions) != ArrayRef<int64_t>({b, seq}))
        nodeFail("position_ids " + shapeStr(shapeOf(positions)) + " must be " +
                 shapeStr({b, seq}));
      Value idx = normalizeIndex(positions, cs[0]);
      return builder.createOrFold<GatherOp>(
          currentLoc, tensorType({b, seq, half}, elemOf(cache)), cache, idx,
          builder.getI64IntegerAttr(0));
    }
    if (cs != ArrayRef<int64_t>({b, seq, half}))
      nodeFail(Twine(what) + " " + shapeStr(cs) + " must be " +
               shapeStr({b, seq, half}) + " without position_ids");
    return cache;
  };
  Value cos = reshape(lookup(cosCache, "cos_cache"), {b, seq, 1, half});
  Value sin = reshape(lookup(sinCache, "sin_cache"), {b, seq, 1, half});
  Type et = elemOf(y);
  auto slice = [&](Value v, int64_t start, int64_t step, int64_t count) {
    return builder.createOrFold<SliceOp>(
        currentLoc, tensorType({b, seq, heads, count}, et), v,
        builder.getDenseI64ArrayAttr({0, 0, 0, start}),
        builder.getDenseI64ArrayAttr({1, 1, 1, step}));
  };
  bool interleaved = attrInt("interleaved", 0) != 0;
  Value x1 = interleaved ? slice(y, 0, 2, half) : slice(y, 0, 1, half);
  Value x2 = interleaved ? slice(y, 1, 2, half) : slice(y, half, 1, half);
  Value real = binary<SubOp>(binary<MulOp>(cos, x1), binary<MulOp>(sin, x2));
  Value imag = binary<AddOp>(binary<MulOp>(sin, x1), binary<MulOp>(cos, x2));
  auto concat = [&](ArrayRef<Value> parts, int64_t axis,
                    ArrayRef<int64_t> shape) {
    return builder.createOrFold<ConcatOp>(currentLoc, tensorType(shape, et),
                                          parts, builder.getI64IntegerAttr(axis));
  };
  Value rotated;
  if (interleaved) {
    // (real_k, imag_k) pairs side by side.
    Value r = reshape(real, {b, seq, heads, half, 1});
    Value m = reshape(imag, {b, seq, heads, half, 1});
    rotated = reshape(concat({r, m}, 4, {b, seq, heads, half, 2}),
                      {b, seq, heads, rot});
  } else {
    rotated = concat({real, imag}, 3, {b, seq, heads, rot});
  }
  if (rot < d)
    rotated = concat({rotated, slice(y, rot, 1, d - rot)}, 3, ys);
  define(0, rank == 4 ? transposeTo(rotated, {0, 2, 1, 3})
                      : reshape(rotated, xs));
}

} // namespace detail
} // namespace otc
