//===- LinalgOps.cpp - importing MatMul and Gemm --------------------------===//
//
// MatMul (numpy rules: 1-D operands become a row or a column that the result
// drops, batch dimensions broadcast) and Gemm (transA/transB as matmul
// flags, alpha and beta as scalar multiplications, C broadcast to [M, N]),
// both onto otc.matmul; a MatMul of two constants folds at import. Operands
// must be float tensors.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace otc {
namespace detail {

/// The product of two constant operands (batch dimensions broadcast), as a
/// constant: the angle tables of rotary embeddings are such products of
/// constant frequencies and positions. Null when an operand is not a
/// constant. Accumulates in double, rounds once to float32.
static Value foldConstantMatMul(OpBuilder &builder, Location loc, Value a,
                                Value b, ArrayRef<int64_t> result) {
  DenseElementsAttr ca, cb;
  if (!matchPattern(a, m_Constant(&ca)) || !matchPattern(b, m_Constant(&cb)))
    return Value();
  ArrayRef<int64_t> as = cast<RankedTensorType>(a.getType()).getShape(),
                    bs = cast<RankedTensorType>(b.getType()).getShape();
  size_t rank = result.size();
  if (as.size() != rank || bs.size() != rank ||
      ShapedType::getNumElements(result) > (int64_t(1) << 22))
    return Value();
  SmallVector<float> av(ca.getValues<float>()), bv(cb.getValues<float>());
  int64_t m = result[rank - 2], n = result.back(), k = as.back();
  // Element offset of batch index `bi` (row-major over result's batch dims)
  // in an operand of shape `s`, whose batch dims broadcast to result's.
  auto batchOffset = [&](ArrayRef<int64_t> s, int64_t bi) {
    int64_t offset = 0, stride = s[s.size() - 1] * s[s.size() - 2];
    for (size_t d = rank - 2; d-- > 0;) {
      int64_t idx = bi % result[d];
      bi /= result[d];
      if (s[d] != 1)
        offset += idx * stride;
      stride *= s[d];
    }
    return offset;
  };
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    batches *= result[d];
  SmallVector<float> out;
  out.reserve(batches * m * n);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ao = batchOffset(as, bi), bo = batchOffset(bs, bi);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += double(av[ao + i * k + p]) * double(bv[bo + p * n + j]);
        out.push_back(static_cast<float>(sum));
      }
  }
  auto type = RankedTensorType::get(result, builder.getF32Type());
  return builder.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, ArrayRef<float>(out)));
}

void Importer::importMatMul() {
  Value a = requireFloat(input(0), "A"), b = requireFloat(input(1), "B");
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.empty() || bs.empty())
    nodeFail("operands must have rank >= 1, got " + shapeStr(as) + " x " +
             shapeStr(bs));
  // numpy rules: a 1-D lhs is a row [1, K], a 1-D rhs a column [K, 1]; the
  // added dimension is removed from the result.
  SmallVector<int64_t> a2(as), b2(bs);
  if (as.size() == 1)
    a2.insert(a2.begin(), 1);
  if (bs.size() == 1)
    b2.push_back(1);
  if (a2.back() != b2[b2.size() - 2])
    nodeFail("contracting dimensions differ: " + shapeStr(as) + " x " +
             shapeStr(bs));
  auto batch = broadcastShapes(ArrayRef<int64_t>(a2).drop_back(2),
                               ArrayRef<int64_t>(b2).drop_back(2));
  if (!batch)
    nodeFail("batch dimensions do not broadcast: " + shapeStr(as) + " x " +
             shapeStr(bs));
  Type f32 = builder.getF32Type();
  if (as.size() == 1)
    a = reshape(a, a2);
  if (bs.size() == 1)
    b = reshape(b, b2);
  SmallVector<int64_t> r(*batch);
  r.push_back(a2[a2.size() - 2]);
  r.push_back(b2.back());
  Value y = foldConstantMatMul(builder, currentLoc, a, b, r);
  if (!y)
    y = builder.createOrFold<MatMulOp>(currentLoc, tensorType(r, f32), a, b);
  SmallVector<int64_t> final(*batch);
  if (as.size() != 1)
    final.push_back(a2[a2.size() - 2]);
  if (bs.size() != 1)
    final.push_back(b2.back());
  if (final != r)
    y = reshape(y, final);
  define(0, y);
}

void Importer::importGemm() {
  Value a = requireFloat(input(0), "A"), b = requireFloat(input(1), "B");
  Value c = getOptional(2);
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.size() != 2 || bs.size() != 2)
    nodeFail("A and B must be 2-D, got " + shapeStr(as) + " and " +
             shapeStr(bs));
  bool ta = attrInt("transA", 0) != 0, tb = attrInt("transB", 0) != 0;
  float alpha = attrFloat("alpha", 1.0f), beta = attrFloat("beta", 1.0f);
  int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
  int64_t kb = tb ? bs[1] : bs[0], n = tb ? bs[0] : bs[1];
  if (k != kb)
    nodeFail("contracting dimensions differ: " + shapeStr(as) + " x " +
             shapeStr(bs) + " (transA=" + Twine(int(ta)) +
             ", transB=" + Twine(int(tb)) + ")");
  Type f32 = builder.getF32Type();
  SmallVector<int64_t> r = {m, n};
  Value y = builder.createOrFold<MatMulOp>(currentLoc, tensorType(r, f32), a, b,
                                           ta, tb);
  if (alpha != 1.0f)
    y = binary<MulOp>(y, scalarF32(alpha));
  if (c && beta != 0.0f) {
    requireFloat(c, "C");
    auto bc = broadcastShapes(shapeOf(c), r);
    if (!bc || ArrayRef<int64_t>(*bc) != ArrayRef<int64_t>(r))
      nodeFail("C " + shapeStr(shapeOf(c)) + " does not broadcast to " +
               shapeStr(r));
    if (beta != 1.0f)
      c = binary<MulOp>(c, scalarF32(beta));
    y = binary<AddOp>(y, c);
  }
  define(0, y);
}

} // namespace detail
} // namespace otc

namespace otc {
namespace detail {

/// Conv's columns for any strides, pads and dilations: [N * positions,
/// groups, C/groups * taps], each output position's receptive field gathered
/// from the input, channel-major as W's rows are laid out.
Value Importer::receptiveFields(Value x, ArrayRef<int64_t> kernel,
                                ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> dil, ArrayRef<int64_t> pads,
                                ArrayRef<int64_t> outSp, int64_t groups) {
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t rank = outSp.size(), n = xs[0], c = xs[1], cg = c / groups;
  int64_t positions = numElements(outSp), taps = numElements(kernel);
  Type f32 = elemOf(x);
  // Each (position, tap) reads the input at one spatial position (all its
  // N x C values), or the appended row of zeros (index `plane`) where it
  // falls in the padding.
  int64_t plane = numElements(xs.drop_front(2));
  SmallVector<int64_t> index(positions * taps);
  SmallVector<int64_t> o(rank), k(rank);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t d = rank - 1, r = p; d >= 0; --d) {
      o[d] = r % outSp[d];
      r /= outSp[d];
    }
    for (int64_t q = 0; q < taps; ++q) {
      for (int64_t d = rank - 1, r = q; d >= 0; --d) {
        k[d] = r % kernel[d];
        r /= kernel[d];
      }
      int64_t flat = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t at = o[d] * strides[d] - pads[d] + k[d] * dil[d];
        inside &= at >= 0 && at < xs[2 + d];
        flat = flat * xs[2 + d] + at;
      }
      index[p * taps + q] = inside ? flat : plane;
    }
  }
  // The spatial positions lead, each a row of the N x C values there, so
  // the gather (and its gradient, a sum of rows) moves whole rows: along
  // the last axis every index would move one element, and the gradient's
  // sum would be a scatter of single elements (Whisper's Conv1d: 1.1M rows
  // of one element, latency-bound).
  Value rows = reshape(transposeTo(reshape(x, {n, c, plane}), {2, 0, 1}),
                       {plane, n * c});
  Value zeros = builder.create<ConstantOp>(
      currentLoc, DenseElementsAttr::get(tensorType({1, n * c}, f32),
                                         FloatAttr::get(f32, 0.0)));
  Value padded = builder.createOrFold<ConcatOp>(
      currentLoc, tensorType({plane + 1, n * c}, f32), ValueRange{rows, zeros},
      builder.getI64IntegerAttr(0));
  auto idxType = tensorType({positions * taps}, builder.getI64Type());
  Value idx = builder.create<ConstantOp>(
      currentLoc, DenseElementsAttr::get(idxType, ArrayRef<int64_t>(index)));
  Value g = builder.createOrFold<GatherOp>(
      currentLoc, tensorType({positions * taps, n * c}, f32), padded, idx,
      builder.getI64IntegerAttr(0));
  // [P, T, N, C] -> [N, P, C, T] -> [N * P, G, C/G * T].
  Value t = transposeTo(reshape(g, {positions, taps, n, c}), {2, 0, 3, 1});
  return reshape(t, {n * positions, groups, cg * taps});
}

/// Conv (1-D to 3-D: strides, pads or auto_pad, dilations, groups) as a
/// product: each output position's receptive field gathered from the input
/// (im2col; padding reads an appended zero), then one GEMM per group against
/// the weights as [M, C/G * K]. A patch embedding (kernel = stride, no
/// padding or dilation) needs no gather: its patches are a reshape and a
/// transpose of the input. The gradients are those of the gather, the
/// transposes and the product.
ConvGeometry Importer::convGeometry(ArrayRef<int64_t> xs,
                                    ArrayRef<int64_t> ws) {
  ConvGeometry g;
  g.rank = static_cast<int64_t>(xs.size()) - 2;
  const int64_t rank = g.rank;
  if (rank < 1 || rank > 3 || ws.size() != xs.size())
    nodeFail("X " + shapeStr(xs) + " and W " + shapeStr(ws) +
             " must be [N, C, D...] and [M, C/group, K...] with 1 to 3 "
             "spatial dimensions");
  int64_t c = xs[1], m = ws[0];
  g.groups = attrInt("group", 1);
  if (g.groups < 1 || c % g.groups || m % g.groups || ws[1] != c / g.groups)
    nodeFail("group " + Twine(g.groups) + " does not divide X's " + Twine(c) +
             " channels and W's " + Twine(m) + " into W's " + Twine(ws[1]) +
             " per group");
  auto ints = [&](StringRef name, int64_t dflt, size_t count) {
    SmallVector<int64_t> v = attrInts(name).value_or(SmallVector<int64_t>());
    if (v.empty())
      v.assign(count, dflt);
    if (v.size() != count)
      nodeFail(name + " has " + Twine(v.size()) + " values, expected " +
               Twine(count));
    return v;
  };
  g.kernel.assign(ws.begin() + 2, ws.end());
  if (auto ks = attrInts("kernel_shape");
      ks && ArrayRef<int64_t>(*ks) != ArrayRef<int64_t>(g.kernel))
    nodeFail("kernel_shape " + shapeStr(*ks) + " is not W's " +
             shapeStr(g.kernel));
  g.strides = ints("strides", 1, rank);
  g.dil = ints("dilations", 1, rank);
  g.pads = ints("pads", 0, 2 * rank);
  for (int64_t d = 0; d < rank; ++d)
    if (g.strides[d] < 1 || g.dil[d] < 1 || g.pads[d] < 0 ||
        g.pads[rank + d] < 0)
      nodeFail("strides and dilations must be positive, pads not negative");
  std::string autoPad = attrString("auto_pad", "NOTSET");
  g.outSp.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t span = g.dil[d] * (g.kernel[d] - 1) + 1, in = xs[2 + d];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (in + g.strides[d] - 1) / g.strides[d];
      int64_t total =
          std::max<int64_t>(0, (out - 1) * g.strides[d] + span - in);
      int64_t small = total / 2, big = total - small;
      g.pads[d] = autoPad == "SAME_UPPER" ? small : big;
      g.pads[rank + d] = autoPad == "SAME_UPPER" ? big : small;
    } else if (autoPad == "VALID") {
      g.pads[d] = g.pads[rank + d] = 0;
    } else if (autoPad != "NOTSET") {
      nodeFail("auto_pad '" + autoPad + "' is not NOTSET, SAME_UPPER, "
               "SAME_LOWER or VALID");
    }
    int64_t padded = in + g.pads[d] + g.pads[rank + d];
    if (padded < span)
      nodeFail("the kernel's span " + Twine(span) + " exceeds the padded "
               "input's " + Twine(padded) + " on spatial dimension " + Twine(d));
    g.outSp[d] = (padded - span) / g.strides[d] + 1;
  }
  return g;
}

Value Importer::convColumns(Value x, const ConvGeometry &g) {
  ArrayRef<int64_t> xs = shapeOf(x);
  const int64_t rank = g.rank, n = xs[0], c = xs[1];
  int64_t positions = numElements(g.outSp), taps = numElements(g.kernel);
  bool patches = true;
  for (int64_t d = 0; d < rank; ++d)
    patches &= g.strides[d] == g.kernel[d] && g.dil[d] == 1 && g.pads[d] == 0 &&
               g.pads[rank + d] == 0 && xs[2 + d] == g.outSp[d] * g.kernel[d];
  if (!patches)
    return receptiveFields(x, g.kernel, g.strides, g.dil, g.pads, g.outSp,
                           g.groups);
  // [N, C, O1, K1, O2, K2...] -> [N, O1, O2..., C, K1, K2...].
  SmallVector<int64_t> split{n, c};
  for (int64_t d = 0; d < rank; ++d)
    split.append({g.outSp[d], g.kernel[d]});
  SmallVector<int64_t> perm{0};
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(2 + 2 * d);
  perm.push_back(1);
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(3 + 2 * d);
  Value t = transposeTo(reshape(x, split), perm);
  return reshape(t, {n * positions, g.groups, c / g.groups * taps});
}

Value Importer::convProduct(Value cols, Value w, const ConvGeometry &g,
                            int64_t n) {
  ArrayRef<int64_t> ws = shapeOf(w);
  const int64_t m = ws[0], groups = g.groups, mg = m / groups,
                row = ws[1] * numElements(g.kernel),
                positions = numElements(g.outSp);
  Type f32 = elemOf(cols);
  Value wm = reshape(w, {groups, mg, row});
  Value y;
  if (groups == 1) {
    y = builder.createOrFold<MatMulOp>(
        currentLoc, tensorType({n * positions, m}, f32),
        reshape(cols, {n * positions, row}), reshape(wm, {m, row}),
        /*transpose_lhs=*/UnitAttr(), /*transpose_rhs=*/builder.getUnitAttr());
    y = reshape(y, {n, positions, m});
  } else {
    Value lhs = transposeTo(cols, {1, 0, 2}); // [G, N * P, C/G * T]
    y = builder.createOrFold<MatMulOp>(
        currentLoc, tensorType({groups, n * positions, mg}, f32), lhs, wm,
        /*transpose_lhs=*/UnitAttr(), /*transpose_rhs=*/builder.getUnitAttr());
    // [G, N, P, M/G] -> [N, P, G, M/G] -> [N, P, M].
    y = transposeTo(reshape(y, {groups, n, positions, mg}), {1, 2, 0, 3});
    y = reshape(y, {n, positions, m});
  }
  y = transposeTo(y, {0, 2, 1}); // [N, M, P]
  SmallVector<int64_t> outShape{n, m};
  llvm::append_range(outShape, g.outSp);
  return reshape(y, outShape);
}

void Importer::importConv() {
  Value x = requireFloat(input(0), "X"), w = requireFloat(input(1), "W");
  Value bias = getOptional(2);
  ConvGeometry g = convGeometry(shapeOf(x), shapeOf(w));
  // cols: [G, N * positions, C/G * taps], channel-major within a row, as
  // W's rows are laid out.
  Value cols = convColumns(x, g);
  Value y = convProduct(cols, w, g, shapeOf(x)[0]);
  if (bias) {
    int64_t m = shapeOf(w)[0];
    if (shapeOf(bias) != ArrayRef<int64_t>{m})
      nodeFail("B " + shapeStr(shapeOf(bias)) + " must be [" + Twine(m) + "]");
    SmallVector<int64_t> bshape{1, m};
    bshape.append(g.rank, 1);
    y = binary<AddOp>(y, reshape(requireFloat(bias, "B"), bshape));
  }
  define(0, y);
}

void Importer::importAveragePool() {
  // Windows that tile the input (kernel = strides, no padding: Gemma 3's
  // projector, nn.AvgPool2d(k)): a reshape of each spatial axis into
  // (blocks, kernel) and a mean over the kernels' axes.
  Value x = requireFloat(input(0), "the input");
  ArrayRef<int64_t> xs = shapeOf(x);
  auto ks = attrInts("kernel_shape");
  if (!ks || ks->size() + 2 != xs.size())
    nodeFail("kernel_shape must give each of the input's " +
             std::to_string(xs.size() >= 2 ? xs.size() - 2 : 0) +
             " spatial dimensions");
  SmallVector<int64_t> strides(ks->size(), 1); // ONNX's default
  if (auto st = attrInts("strides"))
    strides.assign(st->begin(), st->end());
  SmallVector<int64_t> pads(2 * ks->size(), 0);
  if (auto pd = attrInts("pads"))
    pads.assign(pd->begin(), pd->end());
  std::string autoPad = attrString("auto_pad", "NOTSET");
  bool tiles = strides == SmallVector<int64_t>(ks->begin(), ks->end()) &&
               llvm::all_of(pads, [](int64_t p) { return p == 0; }) &&
               (autoPad == "NOTSET" || autoPad == "VALID") &&
               attrInt("ceil_mode", 0) == 0;
  for (size_t d = 0; tiles && d < ks->size(); ++d)
    tiles = (*ks)[d] > 0 && xs[d + 2] % (*ks)[d] == 0;
  if (!tiles)
    nodeFail("only windows that tile the input are imported (kernel_shape "
             "equal to strides, dividing each spatial dimension, no padding)");
  SmallVector<int64_t> split{xs[0], xs[1]}, axes, out{xs[0], xs[1]};
  for (size_t d = 0; d < ks->size(); ++d) {
    split.push_back(xs[d + 2] / (*ks)[d]);
    split.push_back((*ks)[d]);
    axes.push_back(static_cast<int64_t>(split.size()) - 1);
    out.push_back(xs[d + 2] / (*ks)[d]);
  }
  Value y = reduceSum(reshape(x, split), axes, /*keepDims=*/false);
  int64_t n = 1;
  for (int64_t k : *ks)
    n *= k;
  define(0, binary<MulOp>(y, scalarF32(1.0 / static_cast<double>(n))));
}

} // namespace detail
} // namespace otc
