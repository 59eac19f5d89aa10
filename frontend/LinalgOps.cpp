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
