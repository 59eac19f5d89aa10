//===- TrainingOps.cpp - training ops of the reference interpreter --------===//
//
// The ops that differentiation and the training loop bring in: dropout (with
// the replayable mask of Interpreter.cpp) and its gradient, the softmax
// cross-entropy and negative log-likelihood losses with their gradients, the
// relu and tanh gradient kernels and the AdamW update. The losses take
// [N, C] scores and [N] labels; rows whose label is `ignore_index` count for
// nothing, also not in the divisor of "mean".
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"

#include <cmath>
#include <limits>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

/// mask[i] = dropoutKeep(key, stream, i, ratio);
/// output[i] = input[i] * mask[i] / (1 - ratio).
LogicalResult Interpreter::run(otc::DropoutOp op) {
  const Tensor &in = get(op.getInput());
  uint64_t key =
      static_cast<uint64_t>(static_cast<int64_t>(get(op.getKey()).data[0]));
  uint64_t stream = static_cast<uint64_t>(op.getStream());
  double ratio = op.getRatio().convertToDouble();
  Tensor out = zeros(in.shape), mask = zeros(in.shape);
  for (int64_t i = 0, e = in.data.size(); i < e; ++i) {
    mask.data[i] = otc::interp::dropoutKeep(key, stream, i, ratio) ? 1.0 : 0.0;
    out.data[i] = in.data[i] * mask.data[i] / (1.0 - ratio);
  }
  set(op.getOutput(), std::move(out));
  set(op.getMask(), std::move(mask));
  return success();
}

/// result[i] = grad[i] * mask[i] / (1 - ratio).
LogicalResult Interpreter::run(otc::DropoutGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &mask = get(op.getMask());
  double ratio = op.getRatio().convertToDouble();
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = grad.data[i] * mask.data[i] / (1.0 - ratio);
  set(op.getResult(), std::move(out));
  return success();
}

FailureOr<std::vector<bool>>
otc::interp::detail::activeRows(Operation *op, const Tensor &labels,
                                int64_t classes,
                                std::optional<int64_t> ignoreIndex) {
  std::vector<bool> active(labels.data.size());
  for (size_t r = 0; r < labels.data.size(); ++r) {
    auto label = static_cast<int64_t>(labels.data[r]);
    active[r] = !(ignoreIndex && label == *ignoreIndex);
    if (active[r] && (label < 0 || label >= classes))
      return op->emitError("label ") << label << " of row " << r
                                     << " is outside [0, " << classes << ")";
  }
  return active;
}

FailureOr<otc::interp::detail::GradRows>
otc::interp::detail::gradRows(Operation *op, const Tensor &labels,
                              int64_t classes,
                              std::optional<int64_t> ignoreIndex,
                              StringRef reduction) {
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, ignoreIndex);
  if (failed(active))
    return failure();
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return op->emitError("unknown reduction '") << reduction << "'";
  GradRows rows{std::move(*active), 0};
  for (bool a : rows.active)
    rows.counted += a;
  return rows;
}

double otc::interp::detail::logSumExp(const double *row, int64_t classes) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c)
    max = std::max(max, row[c]);
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(row[c] - max);
  return max + std::log(sum);
}

double otc::interp::detail::rowGradScale(StringRef reduction,
                                         const Tensor &grad, int64_t r,
                                         int64_t counted) {
  if (reduction == "none")
    return grad.data[r];
  if (reduction == "sum")
    return grad.data[0];
  return grad.data[0] / static_cast<double>(counted);
}

/// Sets `loss` from per-row losses: all of them ("none"), their `sum`
/// ("sum") or the sum over the `counted` rows not ignored ("mean").
LogicalResult Interpreter::reduceLoss(Operation *op, StringRef reduction,
                                      const std::vector<double> &perRow,
                                      double sum, int64_t counted, Value loss) {
  Tensor out = zeros(shapeOf(loss));
  if (reduction == "none")
    out.data = perRow;
  else if (reduction == "sum")
    out.data[0] = sum;
  else if (reduction == "mean")
    out.data[0] = sum / static_cast<double>(counted);
  else
    return op->emitError("unknown reduction '") << reduction << "'";
  set(loss, std::move(out));
  return success();
}

/// loss_n = logsumexp(logits_n) - logits_n[label_n] (0 for ignored rows);
/// "none" returns them, "sum" adds them, "mean" divides the sum by the number
/// of rows not ignored (NaN when every row is ignored, as 0 / 0).
LogicalResult Interpreter::run(otc::SoftmaxCrossEntropyOp op) {
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, op.getIgnoreIndex());
  if (failed(active))
    return failure();
  Tensor perRow = zeros({rows});
  double sum = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!(*active)[r])
      continue;
    const double *row = logits.data.data() + r * classes;
    perRow.data[r] =
        logSumExp(row, classes) - row[static_cast<int64_t>(labels.data[r])];
    sum += perRow.data[r];
    ++counted;
  }
  return reduceLoss(op, op.getReduction(), perRow.data, sum, counted,
                    op.getLoss());
}

/// result[n, c] = g_n * (softmax(logits_n)[c] - [c == label_n]), where g_n is
/// grad[n] ("none"), grad ("sum") or grad / (rows not ignored) ("mean"), and 0
/// for ignored rows.
LogicalResult Interpreter::run(otc::SoftmaxCrossEntropyGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  Tensor out = zeros(logits.shape);
  for (int64_t r = 0; r < rows; ++r) {
    if (!counts->active[r])
      continue;
    double g = rowGradScale(reduction, grad, r, counts->counted);
    const double *row = logits.data.data() + r * classes;
    double lse = logSumExp(row, classes);
    auto label = static_cast<int64_t>(labels.data[r]);
    for (int64_t c = 0; c < classes; ++c) {
      double softmax = std::exp(row[c] - lse);
      out.data[r * classes + c] = g * (softmax - (c == label ? 1.0 : 0.0));
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// loss_n = -input[n, label_n] (0 for ignored rows), reduced like
/// softmax_cross_entropy: "none" returns them, "sum" adds them, "mean"
/// divides the sum by the number of rows not ignored.
LogicalResult Interpreter::run(otc::NllLossOp op) {
  const Tensor &in = get(op.getInput());
  const Tensor &labels = get(op.getLabels());
  int64_t rows = in.shape[0], classes = in.shape[1];
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, op.getIgnoreIndex());
  if (failed(active))
    return failure();
  std::vector<double> perRow(rows, 0.0);
  double sum = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!(*active)[r])
      continue;
    perRow[r] = -in.data[r * classes + static_cast<int64_t>(labels.data[r])];
    sum += perRow[r];
    ++counted;
  }
  return reduceLoss(op, op.getReduction(), perRow, sum, counted, op.getLoss());
}

/// result[n, c] = -g_n if c == label_n else 0, where g_n is the row's share
/// of the incoming gradient (rowGradScale) and 0 for ignored rows. The
/// result type gives [N, C].
LogicalResult Interpreter::run(otc::NllLossGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &labels = get(op.getLabels());
  Tensor out = zeros(shapeOf(op.getResult()));
  if (out.shape.size() != 2 || labels.shape.size() != 1 ||
      labels.shape[0] != out.shape[0])
    return op.emitError("expects an [N, C] result and [N] labels");
  int64_t rows = out.shape[0], classes = out.shape[1];
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  for (int64_t r = 0; r < rows; ++r)
    if (counts->active[r])
      out.data[r * classes + static_cast<int64_t>(labels.data[r])] =
          -rowGradScale(reduction, grad, r, counts->counted);
  set(op.getResult(), std::move(out));
  return success();
}

/// result[i] = input[i] > 0 ? grad[i] : 0.
LogicalResult Interpreter::run(otc::ReluGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &in = get(op.getInput());
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = in.data[i] > 0.0 ? grad.data[i] : 0.0;
  set(op.getResult(), std::move(out));
  return success();
}

/// result[i] = grad[i] * (1 - y[i]^2) with y = tanh(x) the forward output.
LogicalResult Interpreter::run(otc::TanhGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &y = get(op.getOutput());
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = grad.data[i] * (1.0 - y.data[i] * y.data[i]);
  set(op.getResult(), std::move(out));
  return success();
}

/// The AdamW update of ir/OtcOps.td, elementwise, with t = step and
/// g = grad_factor * grad:
///   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2;
///   p' = p - lr (m' / (1 - b1^t) / (sqrt(v' / (1 - b2^t)) + eps) + wd p);
/// a factor that is not finite keeps p, m and v.
LogicalResult Interpreter::run(otc::AdamWOp op) {
  const Tensor &p = get(op.getParam());
  Tensor g = get(op.getGrad());
  const Tensor &m = get(op.getM());
  const Tensor &v = get(op.getV());
  double lr = get(op.getLr()).data[0];
  double t = get(op.getStep()).data[0];
  double factor = get(op.getGradFactor()).data[0];
  bool skip = !std::isfinite(factor);
  for (double &x : g.data)
    x *= factor;
  double b1 = op.getBeta1().convertToDouble();
  double b2 = op.getBeta2().convertToDouble();
  double eps = op.getEpsilon().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor newP = zeros(p.shape), newM = zeros(p.shape), newV = zeros(p.shape);
  for (int64_t i = 0, e = p.data.size(); i < e; ++i) {
    if (skip) {
      newP.data[i] = p.data[i];
      newM.data[i] = m.data[i];
      newV.data[i] = v.data[i];
      continue;
    }
    newM.data[i] = b1 * m.data[i] + (1.0 - b1) * g.data[i];
    newV.data[i] = b2 * v.data[i] + (1.0 - b2) * g.data[i] * g.data[i];
    double mHat = newM.data[i] / (1.0 - std::pow(b1, t));
    double vHat = newV.data[i] / (1.0 - std::pow(b2, t));
    newP.data[i] =
        p.data[i] - lr * (mHat / (std::sqrt(vHat) + eps) + wd * p.data[i]);
  }
  if (Value copy = op.getCopy()) {
    Tensor c = newP;
    auto to = cast<FloatType>(elementTypeOf(copy));
    for (double &x : c.data) {
      llvm::APFloat f(x);
      bool losesInfo = false;
      f.convert(to.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
      x = f.convertToDouble();
    }
    set(copy, std::move(c));
  }
  set(op.getNewParam(), std::move(newP));
  set(op.getNewM(), std::move(newM));
  set(op.getNewV(), std::move(newV));
  return success();
}

