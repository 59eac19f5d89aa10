//===- ConstantOps.cpp - importing constants and shape queries ------------===//
//
// Constant, and the ops whose result is known once dimensions are bound:
// Shape (with opset 15's start/end), Size, ConstantOfShape and Range. Their
// results are import-time constants (materialized as otc.constant on first
// use), so the shape arithmetic that reads them folds as it is imported.
// ConstantOfShape and Range need constant inputs; otherwise the error says
// the shape computation did not fold.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace otc {
namespace detail {

void Importer::importConstant() {
  if (current->proto->attribute_size() != 1)
    nodeFail("expects exactly one value attribute");
  const onnx::AttributeProto &a = current->proto->attribute(0);
  TensorData t;
  StringRef name = a.name();
  if (name == "value") {
    t = decodeTensor(a.t(), "node '" + current->name + "' (Constant): value",
                     path);
  } else if (name == "value_float") {
    t.floats = {a.f()};
  } else if (name == "value_floats") {
    t.floats.assign(a.floats().begin(), a.floats().end());
    t.shape = {static_cast<int64_t>(t.floats.size())};
  } else if (name == "value_int") {
    t.kind = Kind::I64;
    t.ints = {a.i()};
  } else if (name == "value_ints") {
    t.kind = Kind::I64;
    t.ints.assign(a.ints().begin(), a.ints().end());
    t.shape = {static_cast<int64_t>(t.ints.size())};
  } else {
    nodeFail("attribute '" + name + "' is not supported");
  }
  defineConstant(0, toAttr(&ctx, t));
}

/// A 1-D (or 0-D when `scalar`) int64 attribute holding `vals`.
static DenseElementsAttr i64Attr(MLIRContext *ctx, ArrayRef<int64_t> vals,
                                 bool scalar = false) {
  SmallVector<int64_t> shape;
  if (!scalar)
    shape.push_back(static_cast<int64_t>(vals.size()));
  return DenseElementsAttr::get(
      RankedTensorType::get(shape, IntegerType::get(ctx, 64)), vals);
}

void Importer::importShape() {
  ArrayRef<int64_t> in = shapeOf(input(0));
  int64_t rank = in.size();
  // Opset 15: start and end select a range of dimensions, clamped.
  auto clampDim = [rank](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampDim(attrInt("start", 0));
  int64_t end = clampDim(attrInt("end", rank));
  SmallVector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(in[d]);
  defineConstant(0, i64Attr(&ctx, dims));
}

void Importer::importSize() {
  defineConstant(0, i64Attr(&ctx, {numElements(shapeOf(input(0)))}, true));
}

void Importer::importConstantOfShape() {
  SmallVector<int64_t> shape = constantInts(0, "shape");
  for (int64_t d : shape)
    if (d < 0)
      nodeFail("shape " + shapeStr(shape) + " has a negative size");
  TensorData value;
  value.floats = {0.0f};
  if (const onnx::AttributeProto *a = attr("value")) {
    value = decodeTensor(
        a->t(), "node '" + current->name + "' (ConstantOfShape): value", path);
    if (value.kind == Kind::F32 ? value.floats.size() != 1
                                : value.ints.size() != 1)
      nodeFail("value must hold exactly one element");
  }
  auto type = RankedTensorType::get(shape, elementType(&ctx, value.kind));
  DenseElementsAttr one = toAttr(&ctx, value);
  defineConstant(0,
                 DenseElementsAttr::get(type, one.getValues<Attribute>()[0]));
}

void Importer::importRange() {
  Value start = input(0);
  Type et = elemOf(start);
  if (elemOf(input(1)) != et || elemOf(input(2)) != et)
    nodeFail("start, limit and delta must share one element type");
  double s = constantScalar(0, "start"), l = constantScalar(1, "limit"),
         d = constantScalar(2, "delta");
  if (d == 0)
    nodeFail("delta is 0");
  // The values are computed here: bound their count before allocating.
  double count = std::ceil((l - s) / d);
  auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return std::string(buf);
  };
  std::string args =
      "start " + text(s) + ", limit " + text(l) + " and delta " + text(d);
  if (!std::isfinite(count))
    nodeFail(args + " give no finite element count");
  if (count > static_cast<double>(kMaxImportRange))
    nodeFail(args + " give " + text(count) + " elements, more than the " +
             Twine(kMaxImportRange) + " a Range computed at import may have");
  int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
  auto type = RankedTensorType::get({n}, et);
  if (isa<FloatType>(et)) {
    SmallVector<float> vals;
    for (int64_t i = 0; i < n; ++i)
      vals.push_back(static_cast<float>(s + i * d));
    defineConstant(0, DenseElementsAttr::get(type, ArrayRef<float>(vals)));
    return;
  }
  SmallVector<APInt> vals;
  for (int64_t i = 0; i < n; ++i)
    vals.push_back(APInt(et.getIntOrFloatBitWidth(),
                         static_cast<int64_t>(s) + i * static_cast<int64_t>(d),
                         /*isSigned=*/true));
  defineConstant(0, DenseElementsAttr::get(type, vals));
}

} // namespace detail
} // namespace otc
