//===- ReductionBodies.cpp - bodies of reductions and normalizations ------===//
//
// Kernel bodies of reduce_sum, reduce_max and the softmax family. A
// reduction runs one work item per result element that walks the reduced
// dimensions. softmax, log_softmax and their gradients run one work item per
// row along the axis (outer x inner items, each walking `axis` elements at
// stride `inner`), subtract the row maximum before exponentiating, and write
// each element only after the row's statistics are known, so the output may
// alias the input.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace otc;

/// Emits a reduction of `input` over `axes`: `acc` starts at `init` and each
/// element `v` is folded by the statement `combine`.
static LogicalResult emitReduction(Value input, ArrayRef<int64_t> axes,
                                   StringRef init, StringRef combine,
                                   BodyContext &c) {
  ArrayRef<int64_t> in = bodyShapeOf(input);
  SmallVector<int64_t> strides = stridesOf(in);
  // Output coordinates walk the kept dimensions; the inner loop walks the
  // reduced ones.
  SmallVector<int64_t> kept, reduced;
  for (int64_t d = 0, e = in.size(); d < e; ++d)
    (llvm::is_contained(axes, d) ? reduced : kept).push_back(d);
  c.os << "    int64_t base = 0;\n    { int64_t r = i;\n";
  for (size_t k = kept.size(); k-- > 0;) {
    int64_t d = kept[k];
    c.os << "      base += (r % " << in[d] << ") * " << strides[d] << ";\n";
    if (k)
      c.os << "      r /= " << in[d] << ";\n";
  }
  int64_t count = 1;
  for (int64_t d : reduced)
    count *= in[d];
  c.os << "    }\n    float acc = " << init << ";\n"
       << "    for (int64_t j = 0; j < " << count << "; ++j) {\n"
       << "      int64_t off = base, r = j;\n";
  for (size_t k = reduced.size(); k-- > 0;) {
    int64_t d = reduced[k];
    c.os << "      off += (r % " << in[d] << ") * " << strides[d] << ";\n";
    if (k)
      c.os << "      r /= " << in[d] << ";\n";
  }
  c.os << "      const float v = " << c.in[0] << "[off];\n"
       << "      " << combine << "\n    }\n"
       << "    " << c.out[0] << "[i] = acc;\n";
  return success();
}

/// Emits `base`, the offset of the first element of row `i` along `axis` of
/// `shape`, and returns the C expression of the offset of the row's element
/// `k`.
static std::string emitRowBase(ArrayRef<int64_t> shape, int64_t axis,
                               BodyContext &c) {
  AxisView v = axisView(shape, axis);
  if (v.inner == 1) {
    c.os << "    const int64_t base = i * " << v.axis << ";\n";
    return "base + k";
  }
  c.os << "    const int64_t base = (i / " << v.inner << ") * "
       << v.axis * v.inner << " + i % " << v.inner << ";\n";
  return "base + k * " + std::to_string(v.inner);
}

/// Emits `mx` (row maximum) and `se` (sum of exp(x - mx)) of the row of
/// `x` at offsets `at` (over `k`).
static void emitRowMaxSumExp(StringRef x, StringRef at, int64_t len,
                             BodyContext &c) {
  c.os << "    float mx = " << x << "[base];\n"
       << "    for (int64_t k = 1; k < " << len
       << "; ++k) { const float v = " << x << "[" << at
       << "]; mx = v > mx ? v : mx; }\n"
       << "    float se = 0.0f;\n"
       << "    for (int64_t k = 0; k < " << len << "; ++k) se += expf(" << x
       << "[" << at << "] - mx);\n";
}

/// softmax (`log` false) or log_softmax (`log` true) of one row.
static LogicalResult emitSoftmax(Operation *op, int64_t axis, bool log,
                                 BodyContext &c) {
  ArrayRef<int64_t> shape = bodyShapeOf(op->getResult(0));
  std::string at = emitRowBase(shape, axis, c);
  int64_t len = shape[axis];
  emitRowMaxSumExp(c.in[0], at, len, c);
  if (log)
    c.os << "    const float lse = mx + logf(se);\n"
         << "    for (int64_t k = 0; k < " << len << "; ++k) " << c.out[0]
         << "[" << at << "] = " << c.in[0] << "[" << at << "] - lse;\n";
  else
    c.os << "    const float inv = 1.0f / se;\n"
         << "    for (int64_t k = 0; k < " << len << "; ++k) " << c.out[0]
         << "[" << at << "] = expf(" << c.in[0] << "[" << at
         << "] - mx) * inv;\n";
  return success();
}

/// softmax_grad: y * (g - sum(g * y)); log_softmax_grad: g - exp(y) * sum(g),
/// with g the incoming gradient (operand 0) and y the forward output
/// (operand 1), over one row.
static LogicalResult emitSoftmaxGrad(Operation *op, int64_t axis, bool log,
                                     BodyContext &c) {
  ArrayRef<int64_t> shape = bodyShapeOf(op->getResult(0));
  std::string at = emitRowBase(shape, axis, c);
  int64_t len = shape[axis];
  StringRef g = c.in[0], y = c.in[1];
  std::string gk = (g + "[" + at + "]").str(), yk = (y + "[" + at + "]").str();
  c.os << "    float s = 0.0f;\n"
       << "    for (int64_t k = 0; k < " << len
       << "; ++k) s += " << (log ? gk : gk + " * " + yk) << ";\n"
       << "    for (int64_t k = 0; k < " << len << "; ++k) {\n"
       << "      const float gv = " << gk << ", yv = " << yk << ";\n"
       << "      " << c.out[0] << "[" << at
       << "] = " << (log ? "gv - expf(yv) * s" : "yv * (gv - s)") << ";\n"
       << "    }\n";
  return success();
}

/// top_k of one row: k passes over it, each taking the largest element
/// that comes after the previous pick in the order (descending value, NaN
/// first, equal values by ascending index).
static LogicalResult emitTopK(TopKOp op, BodyContext &c) {
  int64_t n = bodyShapeOf(op.getInput()).back(), k = op.getK();
  // An element's place is (t, v): t = 1 for NaN (above every number), its
  // value v otherwise; larger first, then the lower index.
  c.os << "    const int64_t base = i * " << n << ";\n"
       << "    int pt = 2;\n    float pv = 0.0f;\n    int64_t pi = -1;\n"
       << "    for (int64_t j = 0; j < " << k << "; ++j) {\n"
       << "      int bt = -1;\n      float bv = 0.0f;\n      int64_t bi = 0;\n"
       << "      for (int64_t e = 0; e < " << n << "; ++e) {\n"
       << "        const float x = (float)" << c.in[0] << "[base + e];\n"
       << "        const int t = x != x;\n"
       << "        const float v = t ? 0.0f : x;\n"
       << "        const bool after = t < pt || (t == pt && (v < pv || "
          "(v == pv && e > pi)));\n"
       << "        if (after && (t > bt || (t == bt && v > bv))) { bt = t; "
          "bv = v; bi = e; }\n"
       << "      }\n"
       << "      " << c.out[0] << "[i * " << k << " + j] = bi;\n"
       << "      pt = bt;\n      pv = bv;\n      pi = bi;\n    }\n";
  return success();
}

std::optional<int64_t> otc::reductionWorkItems(Operation *op) {
  return TypeSwitch<Operation *, std::optional<int64_t>>(op)
      .Case([](TopKOp o) -> std::optional<int64_t> {
        ArrayRef<int64_t> shape = bodyShapeOf(o.getInput());
        return numElements(shape.drop_back());
      })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LogSoftmaxGradOp>(
          [](auto o) -> std::optional<int64_t> {
            ArrayRef<int64_t> shape = bodyShapeOf(o.getResult());
            AxisView v = axisView(shape, o.getAxis());
            return v.outer * v.inner;
          })
      .Default([](Operation *) { return std::nullopt; });
}

// A reduction's item loads its reduced elements in a store-free loop; a
// softmax item sweeps its row three times (maximum and sum store-free, then
// the writes), a gradient twice (sum, writes). A row, strided and private
// to its item, is read from memory each time.
std::optional<ItemSteps> otc::reductionItemSteps(Operation *op) {
  return TypeSwitch<Operation *, std::optional<ItemSteps>>(op)
      .Case<ReduceSumOp, ReduceMaxOp>([](auto o) -> std::optional<ItemSteps> {
        ArrayRef<int64_t> in = bodyShapeOf(o.getInput());
        int64_t count = 1;
        for (int64_t d : o.getAxes())
          count *= in[d];
        return ItemSteps{unrolledSteps(count), 0};
      })
      .Case([](TopKOp o) -> std::optional<ItemSteps> {
        int64_t n = bodyShapeOf(o.getInput()).back();
        return ItemSteps{static_cast<int64_t>(o.getK()) * unrolledSteps(n), 0};
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([](auto o) -> std::optional<ItemSteps> {
        int64_t len = bodyShapeOf(o.getResult())[o.getAxis()];
        return ItemSteps{2 * unrolledSteps(len) + len, 0};
      })
      .Case<SoftmaxGradOp, LogSoftmaxGradOp>(
          [](auto o) -> std::optional<ItemSteps> {
            int64_t len = bodyShapeOf(o.getResult())[o.getAxis()];
            return ItemSteps{unrolledSteps(len) + len, 0};
          })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<LogicalResult> otc::emitReductionBody(Operation *op,
                                                    BodyContext &c) {
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ReduceSumOp o) {
        return emitReduction(o.getInput(), o.getAxes(), "0.0f", "acc += v;", c);
      })
      .Case([&](ReduceMaxOp o) {
        return emitReduction(o.getInput(), o.getAxes(), "-INFINITY",
                             "acc = v > acc ? v : acc;", c);
      })
      .Case([&](TopKOp o) { return emitTopK(o, c); })
      .Case([&](SoftmaxOp o) {
        return emitSoftmax(o, o.getAxis(), /*log=*/false, c);
      })
      .Case([&](LogSoftmaxOp o) {
        return emitSoftmax(o, o.getAxis(), /*log=*/true, c);
      })
      .Case([&](SoftmaxGradOp o) {
        return emitSoftmaxGrad(o, o.getAxis(), /*log=*/false, c);
      })
      .Case([&](LogSoftmaxGradOp o) {
        return emitSoftmaxGrad(o, o.getAxis(), /*log=*/true, c);
      })
      .Default([](Operation *) { return std::nullopt; });
}
