//===- DataMovementOps.cpp - data movement ops of the reference interpreter
//===//
//
// The ops that move elements rather than compute new ones (plus the matrix
// product, with its own rounding of an FP8 GEMM's operands): matmul,
// transpose, reshape, broadcast, concat, slice and its gradient, gather and
// its gradient, and trilu. Each loops over the result's
// elements (or, for the gradients, the incoming gradient's) and computes the
// source position from the op's description in ir/OtcOps.td.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"
#include "ir/Fp8.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

/// x rounded to the nearest value of a float format with `mantissaBits`
/// stored mantissa bits, normal exponents from `minExponent` and largest
/// finite value `max` (ties to the even quantum; past max, infinities
/// included, held at +-max): the spacing of the values near x is
/// 2^(e - mantissaBits), e the exponent of x but at least minExponent (the
/// subnormals share the smallest normal binade's spacing).
static double roundToSmallFloat(double x, int mantissaBits, int minExponent,
                                double max) {
  if (std::isnan(x) || x == 0)
    return x;
  double magnitude = std::fabs(x);
  if (std::isinf(magnitude))
    return std::copysign(max, x);
  int e = std::ilogb(magnitude);
  double spacing = std::ldexp(1.0, std::max(e, minExponent) - mantissaBits);
  // magnitude / spacing is exact (a power of two); nearbyint rounds half
  // to even in the default rounding mode.
  double rounded = std::nearbyint(magnitude / spacing) * spacing;
  return std::copysign(std::min(rounded, max), x);
}

double otc::interp::roundToFp8(double x, bool e4m3) {
  return e4m3 ? roundToSmallFloat(x, 3, -6, 448.0)
              : roundToSmallFloat(x, 2, -14, 57344.0);
}

/// The values an FP8 GEMM multiplies for operand `t` in `format` ("e4m3":
/// 3 mantissa bits, normals from 2^-6, max 448; "e5m2": 2 bits, 2^-14,
/// 57344): t scaled by s = max / amax(t) (at most 2^126; 1 when amax is 0 or
/// not finite),
/// rounded to the format, and divided by s again (ir/Fp8.h; a program's
/// first call of the GEMM scales so, later ones from the previous call's
/// amax, which one run of a function never reaches).
static Tensor fp8Operand(const Tensor &t, otc::Fp8Format format) {
  bool e4m3 = format == otc::Fp8Format::E4M3;
  double max = e4m3 ? 448.0 : 57344.0;
  double amax = 0;
  for (double x : t.data)
    amax = std::max(amax, std::fabs(x));
  double scale =
      amax > 0 && std::isfinite(amax) ? std::min(max / amax, 0x1p126) : 1.0;
  Tensor out = t;
  for (double &x : out.data)
    x = otc::interp::roundToFp8(x * scale, e4m3) / scale;
  return out;
}

/// The FP8 values of `v` in `format`, quantized once per tensor (ir/Fp8.h):
/// a value of a function's body is quantized on its first FP8 read and
/// that copy read again; one in a nested region (which may run more than
/// once) is quantized on every read.
const Tensor &Interpreter::fp8Copy(Value v, int format) {
  auto f = static_cast<otc::Fp8Format>(format);
  Region *region = v.getParentRegion();
  if (!region || !isa<func::FuncOp>(region->getParentOp())) {
    Tensor &scratch = fp8Copies[{Value(), format}];
    scratch = fp8Operand(get(v), f);
    return scratch;
  }
  auto [it, fresh] = fp8Copies.try_emplace({v, format});
  if (fresh)
    it->second = fp8Operand(get(v), f);
  return it->second;
}

/// result[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n], where A is
/// lhs (or its last two dims swapped with transpose_lhs), B likewise, and the
/// batch dims of lhs and rhs broadcast to the result's. With `fp8`, A and B
/// are first rounded to their FP8 formats, each scaled as one tensor.
LogicalResult Interpreter::run(otc::MatMulOp op) {
  std::optional<otc::Fp8Operands> fp8 = otc::gemmFp8(op);
  // The two operands' copies: a product of a tensor with itself in one
  // format reads one copy for both.
  Tensor lhsCopy, rhsCopy;
  if (fp8) {
    lhsCopy = fp8Copy(op.getLhs(), static_cast<int>(fp8->lhs));
    rhsCopy = fp8Copy(op.getRhs(), static_cast<int>(fp8->rhs));
  }
  const Tensor &a = fp8 ? lhsCopy : get(op.getLhs());
  const Tensor &b = fp8 ? rhsCopy : get(op.getRhs());
  Tensor out = zeros(shapeOf(op.getResult()));
  size_t rank = out.shape.size(), rankA = a.shape.size();
  int64_t m = out.shape[rank - 2], n = out.shape[rank - 1];
  bool transA = op.getTransposeLhs(), transB = op.getTransposeRhs();
  int64_t k = transA ? a.shape[rankA - 2] : a.shape[rankA - 1];

  ArrayRef<int64_t> batchOut = ArrayRef<int64_t>(out.shape).drop_back(2);
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(a.shape).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef<int64_t>(b.shape).drop_back(2);
  for (int64_t bi = 0, be = elementCount(batchOut); bi < be; ++bi) {
    std::vector<int64_t> batch = unravel(bi, batchOut);
    int64_t baseA = broadcastSource(batch, batchA) * m * k;
    int64_t baseB = broadcastSource(batch, batchB) * k * n;
    int64_t baseOut = bi * m * n;
    if (!transB) {
      // B's rows are contiguous: each term x * B[l, :] is added to the
      // result's row in turn (the same sums, in the same order of l, as
      // the loop below, without striding B by n on every term: an LM
      // head's [C, vocabulary] product took minutes so).
      // Columns in blocks of 256, so that a block of B stays in cache
      // across the rows.
      for (int64_t j0 = 0; j0 < n; j0 += 256) {
        int64_t j1 = std::min<int64_t>(j0 + 256, n);
        for (int64_t i = 0; i < m; ++i) {
          double *row = out.data.data() + baseOut + i * n;
          for (int64_t l = 0; l < k; ++l) {
            double x =
                transA ? a.data[baseA + l * m + i] : a.data[baseA + i * k + l];
            const double *y = b.data.data() + baseB + l * n;
            for (int64_t j = j0; j < j1; ++j)
              row[j] += x * y[j];
          }
        }
      }
      continue;
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) {
          double x =
              transA ? a.data[baseA + l * m + i] : a.data[baseA + i * k + l];
          sum += x * b.data[baseB + j * k + l];
        }
        out.data[baseOut + i * n + j] = sum;
      }
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// result[idx] = input[idx'] where idx'[permutation[d]] = idx[d].
LogicalResult Interpreter::run(otc::TransposeOp op) {
  const Tensor &in = get(op.getInput());
  ArrayRef<int64_t> perm = op.getPermutation();
  Tensor out = zeros(shapeOf(op.getResult()));
  std::vector<int64_t> source(in.shape.size());
  for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, out.shape);
    for (size_t d = 0; d < perm.size(); ++d)
      source[perm[d]] = index[d];
    out.data[i] = in.data[ravel(source, in.shape)];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Same row-major data, new shape.
LogicalResult Interpreter::run(otc::ReshapeOp op) {
  Tensor out = get(op.getInput());
  out.shape = shapeOf(op.getResult());
  set(op.getResult(), std::move(out));
  return success();
}

/// result[idx] = input[bcast idx].
LogicalResult Interpreter::run(otc::BroadcastOp op) {
  const Tensor &in = get(op.getInput());
  Tensor out = zeros(shapeOf(op.getResult()));
  for (int64_t i = 0, e = out.data.size(); i < e; ++i)
    out.data[i] = in.data[broadcastSource(unravel(i, out.shape), in.shape)];
  set(op.getResult(), std::move(out));
  return success();
}

/// Copies each input in turn into the result, the k-th input starting at
/// the sum of the sizes along `axis` of the inputs before it.
LogicalResult Interpreter::run(otc::ConcatOp op) {
  Tensor out = zeros(shapeOf(op.getResult()));
  int64_t axis = op.getAxis(), offset = 0;
  for (Value input : op.getInputs()) {
    const Tensor &in = get(input);
    for (int64_t i = 0, e = in.data.size(); i < e; ++i) {
      std::vector<int64_t> index = unravel(i, in.shape);
      index[axis] += offset;
      out.data[ravel(index, out.shape)] = in.data[i];
    }
    offset += in.shape[axis];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// The multi-index in the sliced tensor of element `index` of the window:
/// source[d] = starts[d] + index[d] * strides[d].
static std::vector<int64_t> windowSource(ArrayRef<int64_t> index,
                                         ArrayRef<int64_t> starts,
                                         ArrayRef<int64_t> strides) {
  std::vector<int64_t> source(index.size());
  for (size_t d = 0; d < index.size(); ++d)
    source[d] = starts[d] + index[d] * strides[d];
  return source;
}

/// result[i] = input[starts + i * strides] (per dimension).
LogicalResult Interpreter::run(otc::SliceOp op) {
  const Tensor &in = get(op.getInput());
  Tensor out = zeros(shapeOf(op.getResult()));
  for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
    std::vector<int64_t> source =
        windowSource(unravel(i, out.shape), op.getStarts(), op.getStrides());
    out.data[i] = in.data[ravel(source, in.shape)];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Zeros of the result shape with result[starts + i * strides] = grad[i];
/// the window positions are distinct, so nothing is added twice.
LogicalResult Interpreter::run(otc::SliceGradOp op) {
  const Tensor &grad = get(op.getGrad());
  Tensor out = zeros(shapeOf(op.getResult()));
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i) {
    std::vector<int64_t> source =
        windowSource(unravel(i, grad.shape), op.getStarts(), op.getStrides());
    out.data[ravel(source, out.shape)] = grad.data[i];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Reads index `flat` of `indices` as a position along an axis of size
/// `size`: negative ones count from the end; anything outside [-size, size)
/// is an error at `op`.
static FailureOr<int64_t> axisIndex(Operation *op, const Tensor &indices,
                                    int64_t flat, int64_t size) {
  auto i = static_cast<int64_t>(indices.data[flat]);
  if (i < -size || i >= size)
    return op->emitError("index ")
           << i << " is outside [-" << size << ", " << size << ")";
  return i < 0 ? i + size : i;
}

/// With data [A..., D, B...] (D at `axis`) and indices [I...], the result is
/// [A..., I..., B...] and result[a, i, b] = data[a, indices[i], b].
LogicalResult Interpreter::run(otc::GatherOp op) {
  const Tensor &data = get(op.getData());
  const Tensor &indices = get(op.getIndices());
  Tensor out = zeros(shapeOf(op.getResult()));
  int64_t axis = op.getAxis();
  size_t indexRank = indices.shape.size();
  for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, out.shape);
    // index = [a..., i..., b...]: pick i, replace it by indices[i].
    std::vector<int64_t> position(index.begin() + axis,
                                  index.begin() + axis + indexRank);
    FailureOr<int64_t> picked = axisIndex(
        op, indices, ravel(position, indices.shape), data.shape[axis]);
    if (failed(picked))
      return failure();
    std::vector<int64_t> source(index.begin(), index.begin() + axis);
    source.push_back(*picked);
    source.insert(source.end(), index.begin() + axis + indexRank, index.end());
    out.data[i] = data.data[ravel(source, data.shape)];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// The weight of expert e at (depth l, width j): w[e, l, j], or w[e, j, l]
/// when the experts are stored transposed.
static double expertWeight(const Tensor &w, bool transposed, int64_t e,
                           int64_t l, int64_t j) {
  int64_t d1 = w.shape[1], d2 = w.shape[2];
  return transposed ? w.data[(e * d1 + j) * d2 + l]
                    : w.data[(e * d1 + l) * d2 + j];
}

/// result[n, j] = sum over l of x[n, l] * W_e[l, j], e = ids[n]: a row times
/// the matrix of its own expert, one row at a time (a BF16 result is rounded
/// once, after the whole sum, as every BF16 result is).
LogicalResult Interpreter::run(otc::ExpertMatmulOp op) {
  const Tensor &x = get(op.getX());
  const Tensor &ids = get(op.getIds());
  const Tensor &w = get(op.getW());
  Tensor out = zeros(shapeOf(op.getResult()));
  int64_t rows = x.shape[0], depth = x.shape[1], width = out.shape[1];
  for (int64_t n = 0; n < rows; ++n) {
    FailureOr<int64_t> e = axisIndex(op, ids, n, w.shape[0]);
    if (failed(e))
      return failure();
    for (int64_t j = 0; j < width; ++j) {
      double sum = 0.0;
      for (int64_t l = 0; l < depth; ++l)
        sum += x.data[n * depth + l] *
               expertWeight(w, op.getTransposeRhs(), *e, l, j);
      out.data[n * width + j] = sum;
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// result[e] (in the experts' layout) = the sum over the rows n with
/// ids[n] = e of the outer product x[n]^T dy[n], added to `acc` when the op
/// has one (a BF16 result is rounded once, after the whole sum).
LogicalResult Interpreter::run(otc::ExpertMatmulWgradOp op) {
  const Tensor &dy = get(op.getDy());
  const Tensor &x = get(op.getX());
  const Tensor &ids = get(op.getIds());
  Tensor out = startOfSum(op.getAcc(), op.getResult());
  int64_t rows = x.shape[0], depth = x.shape[1], width = dy.shape[1];
  bool transposed = op.getTransposeRhs();
  for (int64_t n = 0; n < rows; ++n) {
    FailureOr<int64_t> e = axisIndex(op, ids, n, out.shape[0]);
    if (failed(e))
      return failure();
    for (int64_t l = 0; l < depth; ++l)
      for (int64_t j = 0; j < width; ++j) {
        int64_t at = transposed ? (*e * width + j) * depth + l
                                : (*e * depth + l) * width + j;
        out.data[at] += x.data[n * depth + l] * dy.data[n * width + j];
      }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// The transpose of gather: zeros of the data shape (the result type), or
/// `acc` when the op adds into it, then result[a, indices[i], b] +=
/// grad[a, i, b] for every element of grad, so a row picked twice receives
/// the sum of both gradients.
LogicalResult Interpreter::run(otc::GatherGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &indices = get(op.getIndices());
  Tensor out = startOfSum(op.getAcc(), op.getResult());
  int64_t axis = op.getAxis();
  size_t indexRank = indices.shape.size();
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, grad.shape);
    std::vector<int64_t> position(index.begin() + axis,
                                  index.begin() + axis + indexRank);
    FailureOr<int64_t> picked = axisIndex(
        op, indices, ravel(position, indices.shape), out.shape[axis]);
    if (failed(picked))
      return failure();
    std::vector<int64_t> target(index.begin(), index.begin() + axis);
    target.push_back(*picked);
    target.insert(target.end(), index.begin() + axis + indexRank, index.end());
    out.data[ravel(target, out.shape)] += grad.data[i];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Over the last two dimensions (row i, column j): with `upper` keeps the
/// elements with j - i >= k, else those with j - i <= k; the rest are 0.
LogicalResult Interpreter::run(otc::TriluOp op) {
  Tensor out = get(op.getInput());
  size_t rank = out.shape.size();
  if (rank < 2)
    return op.emitError("trilu needs a tensor of rank >= 2");
  int64_t rows = out.shape[rank - 2], cols = out.shape[rank - 1];
  int64_t k = op.getK();
  bool upper = op.getUpper();
  for (int64_t flat = 0, e = out.data.size(); flat < e; ++flat) {
    int64_t j = flat % cols, i = (flat / cols) % rows;
    bool keep = upper ? j - i >= k : j - i <= k;
    if (!keep)
      out.data[flat] = 0.0;
  }
  set(op.getResult(), std::move(out));
  return success();
}
