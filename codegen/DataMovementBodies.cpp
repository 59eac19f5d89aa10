//===- DataMovementBodies.cpp - bodies of data movement ops ---------------===//
//
// Kernel bodies of the ops that move elements without arithmetic (or only
// sum them, for gradients): reshape, broadcast, transpose, concat, slice and
// its gradient, gather, and trilu. Every body owns its output elements.
// gather's scatter-add gradient, whose indices may repeat, is a call of the
// kernel library instead (otcrt_gather_grad_*, ir/OtcLibraryCalls.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/Target.h"
#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace otc;

/// Emits the decomposition of `i` into the coordinates `c0`, `c1`, ... of
/// `shape` (one `const int64_t cD` per dimension).
static void emitCoordinates(raw_ostream &os, ArrayRef<int64_t> shape) {
  os << "    int64_t r = i;\n";
  for (size_t d = shape.size(); d-- > 0;) {
    os << "    const int64_t c" << d << " = r % " << shape[d] << ";";
    if (d)
      os << " r /= " << shape[d] << ";";
    os << "\n";
  }
  os << "    (void)r;\n";
}

/// Where a slice or transpose reads: the input offset of result element 0
/// and, per result dimension, the input elements one step along it skips.
struct CopySource {
  int64_t base = 0;
  SmallVector<int64_t> step;
};

static CopySource copySource(Operation *op) {
  ArrayRef<int64_t> out = bodyShapeOf(op->getResult(0));
  SmallVector<int64_t> inStrides = stridesOf(bodyShapeOf(op->getOperand(0)));
  CopySource src;
  src.step.resize(out.size());
  if (auto slice = dyn_cast<SliceOp>(op)) {
    for (auto [d, s] : llvm::enumerate(slice.getStarts()))
      src.base += s * inStrides[d];
    for (size_t d = 0; d < out.size(); ++d)
      src.step[d] = slice.getStrides()[d] * inStrides[d];
  } else {
    ArrayRef<int64_t> perm = cast<TransposeOp>(op).getPermutation();
    for (size_t d = 0; d < out.size(); ++d)
      src.step[d] = inStrides[perm[d]];
  }
  return src;
}

void otc::emitCopySource(raw_ostream &os, Operation *op, StringRef index,
                         StringRef name, std::optional<size_t> dims) {
  ArrayRef<int64_t> out = bodyShapeOf(op->getResult(0));
  CopySource src = copySource(op);
  os << "    int64_t " << name << " = " << src.base
     << ";\n    { int64_t r = " << index << ";\n";
  for (size_t d = dims.value_or(out.size()); d-- > 0;) {
    os << "      " << name << " += (r % " << out[d] << ") * " << src.step[d]
       << ";\n";
    if (d)
      os << "      r /= " << out[d] << ";\n";
  }
  os << "    }\n";
}

static LogicalResult emitTranspose(TransposeOp op, BodyContext &c) {
  emitCopySource(c.os, op, "i");
  c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[src];\n";
  return success();
}

/// The chain `if (a < end_0) <part 0> else if ... else <last part>` over
/// the non-empty inputs of `op` (the last one takes every remaining
/// coordinate), `part(k, src)` printing the statement that reads input k at
/// index `src` (coordinates o, a and n: outer, along the axis, inner).
static void
emitConcatParts(ConcatOp op, int64_t inner, BodyContext &c,
                llvm::function_ref<void(unsigned, StringRef)> part) {
  SmallVector<std::pair<unsigned, int64_t>> parts;
  for (auto [k, in] : llvm::enumerate(op.getInputs()))
    if (int64_t size = bodyShapeOf(in)[op.getAxis()])
      parts.push_back({k, size});
  int64_t begin = 0;
  for (auto [j, p] : llvm::enumerate(parts)) {
    auto [k, size] = p;
    c.os << "    ";
    if (j)
      c.os << "else ";
    if (j + 1 < parts.size())
      c.os << "if (a < " << begin + size << ") ";
    part(k, "(o * " + std::to_string(size) + " + (a - " +
                std::to_string(begin) + ")) * " + std::to_string(inner) +
                " + n");
    begin += size;
  }
}

/// One item per result element: finds the input that holds coordinate `a`
/// along the axis and copies from it.
static LogicalResult emitConcat(ConcatOp op, BodyContext &c) {
  AxisView v = axisView(bodyShapeOf(op.getResult()), op.getAxis());
  c.os << "    const int64_t n = i % " << v.inner << ";\n"
       << "    const int64_t a = (i / " << v.inner << ") % " << v.axis << ";\n"
       << "    const int64_t o = i / " << v.inner * v.axis << ";\n"
       << "    " << bodyCType(op.getResult()) << " x;\n";
  emitConcatParts(op, v.inner, c, [&](unsigned k, StringRef src) {
    c.os << "x = " << c.in[k] << "[" << src << "];\n";
  });
  c.os << "    " << c.out[0] << "[i] = x;\n";
  return success();
}

/// One item per result element: result[c] = input[starts + c * strides].
static LogicalResult emitSlice(SliceOp op, BodyContext &c) {
  emitCopySource(c.os, op, "i");
  c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[src];\n";
  return success();
}

/// 16-byte packets of a slice or concat (packedCopyWidth): item i copies
/// the W elements from i * W on, which lie in one run of W contiguous
/// elements of one input.
static int64_t packetElements(Operation *op) {
  int64_t bytes = storageBytes(getElementTypeOrSelf(op->getResult(0).getType()));
  return bytes > 0 && 16 % bytes == 0 ? 16 / bytes : 0;
}

int otc::packedCopyWidth(Operation *op) {
  int64_t w = packetElements(op);
  if (w <= 1)
    return 1;
  if (auto slice = dyn_cast<SliceOp>(op)) {
    ArrayRef<int64_t> in = bodyShapeOf(slice.getInput());
    ArrayRef<int64_t> out = bodyShapeOf(slice.getResult());
    if (in.empty() || slice.getStrides().back() != 1 || in.back() % w ||
        out.back() % w || slice.getStarts().back() % w)
      return 1;
    return static_cast<int>(w);
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    AxisView v = axisView(bodyShapeOf(concat.getResult()), concat.getAxis());
    if (v.inner % w == 0)
      return static_cast<int>(w);
    if (v.inner != 1)
      return 1;
    for (Value in : concat.getInputs())
      if (bodyShapeOf(in)[concat.getAxis()] % w)
        return 1;
    return static_cast<int>(w);
  }
  return 1;
}

/// The copy of one packet: W elements from `src` of `in` to `e` of `out`.
static void emitPacketCopy(raw_ostream &os, StringRef in, StringRef src,
                           StringRef out) {
  os << "    *reinterpret_cast<uint4 *>(" << out
     << " + e) = *reinterpret_cast<const uint4 *>(" << in << " + " << src
     << ");\n";
}

LogicalResult otc::emitPackedCopyBody(Operation *op, int width,
                                      BodyContext &c) {
  c.os << "    const int64_t e = i * " << width << ";\n";
  if (isa<SliceOp>(op)) {
    emitCopySource(c.os, op, "e");
    emitPacketCopy(c.os, c.in[0], "src", c.out[0]);
    return success();
  }
  auto concat = cast<ConcatOp>(op);
  AxisView v = axisView(bodyShapeOf(concat.getResult()), concat.getAxis());
  c.os << "    const int64_t n = e % " << v.inner << ";\n"
       << "    const int64_t a = (e / " << v.inner << ") % " << v.axis << ";\n"
       << "    const int64_t o = e / " << v.inner * v.axis << ";\n";
  emitConcatParts(concat, v.inner, c, [&](unsigned k, StringRef src) {
    c.os << "{\n  ";
    emitPacketCopy(c.os, c.in[k], src, c.out[0]);
    c.os << "    }\n";
  });
  return success();
}

/// Runs shorter than this copy one element an item.
constexpr int64_t kMinCopyRun = 8;

int64_t otc::copyRunElements(Operation *op) {
  int64_t run = 1;
  if (auto slice = dyn_cast<SliceOp>(op)) {
    // The last dimension read with step 1, and before it each dimension
    // whose inner neighbours are taken whole.
    ArrayRef<int64_t> in = bodyShapeOf(slice.getInput());
    ArrayRef<int64_t> out = bodyShapeOf(slice.getResult());
    for (size_t d = out.size(); d-- > 0;) {
      if (slice.getStrides()[d] != 1)
        break;
      run *= out[d];
      if (out[d] != in[d])
        break;
    }
  } else if (auto transpose = dyn_cast<TransposeOp>(op)) {
    // The trailing dimensions the permutation keeps in place.
    ArrayRef<int64_t> out = bodyShapeOf(transpose.getResult());
    ArrayRef<int64_t> perm = transpose.getPermutation();
    for (size_t d = out.size(); d-- > 0 && perm[d] == static_cast<int64_t>(d);)
      run *= out[d];
  } else if (auto concat = dyn_cast<ConcatOp>(op)) {
    AxisView v = axisView(bodyShapeOf(concat.getResult()), concat.getAxis());
    run = v.axis * v.inner;
  }
  return run >= kMinCopyRun ? run : 1;
}

LogicalResult otc::emitRunCopyBody(Operation *op, int64_t run,
                                   BodyContext &c) {
  c.os << "    const int64_t e = i * " << run << ";\n";
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    // Item i is outer row i: each input's part of it in turn.
    AxisView v = axisView(bodyShapeOf(concat.getResult()), concat.getAxis());
    int64_t begin = 0;
    for (auto [k, in] : llvm::enumerate(concat.getInputs())) {
      int64_t part = bodyShapeOf(in)[concat.getAxis()] * v.inner;
      if (!part)
        continue;
      c.os << "    for (int64_t j = 0; j < " << part << "; ++j)\n      "
           << c.out[0] << "[e + " << begin << " + j] = " << c.in[k] << "[i * "
           << part << " + j];\n";
      begin += part;
    }
    return success();
  }
  // The run is the result dimensions from `first` on; item i is the row
  // of the dimensions before them.
  ArrayRef<int64_t> out = bodyShapeOf(op->getResult(0));
  size_t first = out.size();
  for (int64_t covered = 1; covered < run;)
    covered *= out[--first];
  emitCopySource(c.os, op, "i", "src", first);
  c.os << "    for (int64_t j = 0; j < " << run << "; ++j)\n      " << c.out[0]
       << "[e + j] = " << c.in[0] << "[src + j];\n";
  return success();
}

/// One item per element of the sliced input's shape: the gradient element
/// when the coordinate lies on the window, else zero.
static LogicalResult emitSliceGrad(SliceGradOp op, BodyContext &c) {
  ArrayRef<int64_t> full = bodyShapeOf(op.getResult());
  ArrayRef<int64_t> window = bodyShapeOf(op.getGrad());
  SmallVector<int64_t> gStrides = stridesOf(window);
  ArrayRef<int64_t> starts = op.getStarts(), strides = op.getStrides();
  emitCoordinates(c.os, full);
  c.os << "    bool on = true;\n    int64_t src = 0;\n";
  for (size_t d = 0; d < full.size(); ++d) {
    if (starts[d] == 0 && strides[d] == 1 && window[d] == full[d]) {
      c.os << "    src += c" << d << " * " << gStrides[d] << ";\n";
      continue;
    }
    c.os << "    { const int64_t t = c" << d << " - " << starts[d] << ";\n"
         << "      on = on && t >= 0 && t % " << strides[d] << " == 0 && t / "
         << strides[d] << " < " << window[d] << ";\n"
         << "      src += (t / " << strides[d] << ") * " << gStrides[d]
         << "; }\n";
  }
  c.os << "    " << c.out[0] << "[i] = on ? " << c.in[0] << "[src] : 0.0f;\n";
  return success();
}

/// Emits `const int64_t idx = <indices[p] with negative values counted from
/// the end of an axis of size `axis`>;`.
static void emitIndex(raw_ostream &os, StringRef indices, StringRef p,
                      int64_t axis, StringRef indent) {
  os << indent << "int64_t idx = (int64_t)" << indices << "[" << p << "];\n"
     << indent << "if (idx < 0) idx += " << axis << ";\n";
}

/// One item per result element (outer, p, inner): data[outer, indices[p],
/// inner]; an index outside the axis gives zero instead of a stray read, and
/// is recorded in the kernel library's error record (otc_index_error, which
/// each target's launch macros define).
static LogicalResult emitGather(GatherOp op, BodyContext &c) {
  AxisView v = axisView(bodyShapeOf(op.getData()), op.getAxis());
  int64_t positions = bodyNumel(op.getIndices());
  c.os << "    const int64_t n = i % " << v.inner << ";\n"
       << "    const int64_t p = (i / " << v.inner << ") % " << positions
       << ";\n"
       << "    const int64_t o = i / " << v.inner * positions << ";\n";
  emitIndex(c.os, c.in[1], "p", v.axis, "    ");
  // The kernel gets the error record (otc_err) and the first item reading
  // a position reports one there.
  c.os << "    if ((idx < 0 || idx >= " << v.axis << ") && n == 0 && o == 0) "
       << "otc_index_error(otc_err, p, (int64_t)" << c.in[1] << "[p], "
       << v.axis << ");\n";
  c.os << "    " << c.out[0] << "[i] = (idx >= 0 && idx < " << v.axis << ") ? "
       << c.in[0] << "[(o * " << v.axis << " + idx) * " << v.inner
       << " + n] : (" << bodyCType(op.getResult()) << ")0;\n";
  return success();
}

/// One item per element: kept when its column minus row is >= k (upper) or
/// <= k (lower) in the last two dimensions.
static LogicalResult emitTrilu(TriluOp op, BodyContext &c) {
  ArrayRef<int64_t> shape = bodyShapeOf(op.getResult());
  int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  int64_t cols = shape.empty() ? 1 : shape.back();
  c.os << "    const int64_t col = i % " << cols << ";\n"
       << "    const int64_t row = (i / " << cols << ") % " << rows << ";\n"
       << "    const bool keep = col - row " << (op.getUpper() ? ">=" : "<=")
       << " " << static_cast<int64_t>(op.getK()) << ";\n"
       << "    " << c.out[0] << "[i] = keep ? " << c.in[0] << "[i] : ("
       << bodyCType(op.getResult()) << ")0;\n";
  return success();
}

// gather_grad is a library call (otcrt_gather_grad): no generated item.
std::optional<ItemSteps> otc::dataMovementItemSteps(Operation *) {
  return std::nullopt;
}

std::optional<LogicalResult> otc::emitDataMovementBody(Operation *op,
                                                       BodyContext &c) {
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ReshapeOp) {
        c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[i];\n";
        return success();
      })
      .Case([&](BroadcastOp o) {
        emitBroadcastIndex(c.os, "src", bodyShapeOf(o.getInput()),
                           bodyShapeOf(o.getResult()));
        c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[src];\n";
        return success();
      })
      .Case([&](TransposeOp o) { return emitTranspose(o, c); })
      .Case([&](ConcatOp o) { return emitConcat(o, c); })
      .Case([&](SliceOp o) { return emitSlice(o, c); })
      .Case([&](SliceGradOp o) { return emitSliceGrad(o, c); })
      .Case([&](GatherOp o) { return emitGather(o, c); })
      .Case([&](TriluOp o) { return emitTrilu(o, c); })
      .Default([](Operation *) { return std::nullopt; });
}
