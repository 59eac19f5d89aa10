//===- ReductionOps.cpp - reductions and softmax of the reference interpreter ===//
//
// reduce_sum, reduce_max, softmax and log_softmax along one axis, and the
// gradient kernels of the two softmaxes. The softmaxes subtract the maximum
// of each line before exponentiating so that large inputs do not overflow.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

/// Combines every element of `in` into the output element whose index is the
/// input's with the reduced axes set to 0, starting from `init`. Dropping the
/// size-1 dims without keep_dims does not move any element, so only the
/// shape differs.
template <typename Fn>
static Tensor reduce(const Tensor &in, ArrayRef<int64_t> axes,
                     std::vector<int64_t> resultShape, double init, Fn fn) {
  std::vector<int64_t> keptShape = in.shape;
  for (int64_t axis : axes)
    keptShape[axis] = 1;
  Tensor out = zeros(keptShape);
  for (double &x : out.data)
    x = init;
  for (int64_t i = 0, e = in.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, in.shape);
    for (int64_t axis : axes)
      index[axis] = 0;
    double &acc = out.data[ravel(index, keptShape)];
    acc = fn(acc, in.data[i]);
  }
  out.shape = std::move(resultShape);
  return out;
}

/// result = sum of the input over `axes`.
LogicalResult Interpreter::run(otc::ReduceSumOp op) {
  set(op.getResult(),
      reduce(get(op.getInput()), op.getAxes(), shapeOf(op.getResult()), 0.0,
             [](double acc, double x) { return acc + x; }));
  return success();
}

/// result = maximum of the input over `axes` (NaN if any element is NaN, as
/// in numpy).
LogicalResult Interpreter::run(otc::ReduceMaxOp op) {
  set(op.getResult(),
      reduce(get(op.getInput()), op.getAxes(), shapeOf(op.getResult()),
             -std::numeric_limits<double>::infinity(),
             [](double acc, double x) {
               return std::isnan(acc) || std::isnan(x) ? std::nan("")
                                                       : std::max(acc, x);
             }));
  return success();
}

/// result[r, j] = the index of the (j+1)-th largest element of row r (the
/// last dimension): the row's indices sorted by descending value, NaN
/// first, equal values in ascending index order.
LogicalResult Interpreter::run(otc::TopKOp op) {
  const Tensor &in = get(op.getInput());
  const int64_t n = in.shape.back(), k = op.getK();
  const int64_t rows = n ? static_cast<int64_t>(in.data.size()) / n : 0;
  Tensor out;
  out.shape = shapeOf(op.getResult());
  out.data.resize(static_cast<size_t>(rows * k));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = in.data.data() + r * n;
    for (int64_t e = 0; e < n; ++e)
      order[e] = e;
    auto before = [&](int64_t a, int64_t b) {
      double x = row[a], y = row[b];
      if (std::isnan(x) || std::isnan(y))
        return std::isnan(x) && !std::isnan(y);
      return x > y;
    };
    std::stable_sort(order.begin(), order.end(), before);
    for (int64_t j = 0; j < k; ++j)
      out.data[r * k + j] = static_cast<double>(order[j]);
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// The maximum of line (o, i) of `in` along the axis of `view`.
static double lineMax(const Tensor &in, const AxisView &view, int64_t o,
                      int64_t i) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t a = 0; a < view.size; ++a)
    max = std::max(max, in.data[view.at(o, a, i)]);
  return max;
}

/// Writes into `out` softmax (or, with `log`, log_softmax) of every line of
/// `in` along `axis`:
///   softmax_a = e^(x_a - max) / sum_b e^(x_b - max)
///   log_softmax_a = x_a - max - log(sum_b e^(x_b - max)).
static Tensor softmaxAlong(const Tensor &in, int64_t axis, bool log) {
  AxisView view(in.shape, axis);
  Tensor out = zeros(in.shape);
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t i = 0; i < view.inner; ++i) {
      double max = lineMax(in, view, o, i);
      double sum = 0.0;
      for (int64_t a = 0; a < view.size; ++a)
        sum += std::exp(in.data[view.at(o, a, i)] - max);
      for (int64_t a = 0; a < view.size; ++a) {
        double shifted = in.data[view.at(o, a, i)] - max;
        out.data[view.at(o, a, i)] =
            log ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  }
  return out;
}

/// Emits an error at `op` unless `axis` is a dimension of `tensor`.
static LogicalResult checkAxis(Operation *op, const Tensor &tensor,
                               int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(tensor.shape.size()))
    return op->emitError("axis ") << axis << " is outside [0, "
                                  << tensor.shape.size() << ")";
  return success();
}

LogicalResult Interpreter::run(otc::SoftmaxOp op) {
  if (failed(checkAxis(op, get(op.getInput()), op.getAxis())))
    return failure();
  set(op.getResult(),
      softmaxAlong(get(op.getInput()), op.getAxis(), /*log=*/false));
  return success();
}

LogicalResult Interpreter::run(otc::LogSoftmaxOp op) {
  if (failed(checkAxis(op, get(op.getInput()), op.getAxis())))
    return failure();
  set(op.getResult(),
      softmaxAlong(get(op.getInput()), op.getAxis(), /*log=*/true));
  return success();
}

/// With y the softmax output: result_a = y_a * (g_a - sum_b g_b * y_b) along
/// `axis`.
LogicalResult Interpreter::run(otc::SoftmaxGradOp op) {
  const Tensor &g = get(op.getGrad());
  const Tensor &y = get(op.getOutput());
  if (failed(checkAxis(op, y, op.getAxis())))
    return failure();
  AxisView view(y.shape, op.getAxis());
  Tensor out = zeros(y.shape);
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t i = 0; i < view.inner; ++i) {
      double dot = 0.0;
      for (int64_t a = 0; a < view.size; ++a)
        dot += g.data[view.at(o, a, i)] * y.data[view.at(o, a, i)];
      for (int64_t a = 0; a < view.size; ++a) {
        int64_t at = view.at(o, a, i);
        out.data[at] = y.data[at] * (g.data[at] - dot);
      }
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// With y the log_softmax output: result_a = g_a - e^(y_a) * sum_b g_b along
/// `axis`.
LogicalResult Interpreter::run(otc::LogSoftmaxGradOp op) {
  const Tensor &g = get(op.getGrad());
  const Tensor &y = get(op.getOutput());
  if (failed(checkAxis(op, y, op.getAxis())))
    return failure();
  AxisView view(y.shape, op.getAxis());
  Tensor out = zeros(y.shape);
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t i = 0; i < view.inner; ++i) {
      double sum = 0.0;
      for (int64_t a = 0; a < view.size; ++a)
        sum += g.data[view.at(o, a, i)];
      for (int64_t a = 0; a < view.size; ++a) {
        int64_t at = view.at(o, a, i);
        out.data[at] = g.data[at] - std::exp(y.data[at]) * sum;
      }
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}
