//===- FusedOps.cpp - fused transformer ops of the reference interpreter --===//
//
// The ops of ir/OtcFusedOps.td but attention (AttentionOps.cpp): layer and
// RMS normalization, GELU, SiLU, the rotary embedding and cross-entropy, and
// their gradient kernels. Each one is written from the math of its
// description as plain loops over the elements, in double precision, without
// the blocking or reuse of buffers that a fast kernel would use: the
// normalizations work on each row of the flattened trailing dimensions. The
// gradients read only the operands that their op lists, so a gradient kernel
// that is wrong about what the forward saved fails the gradient checks.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"

#include <cmath>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

namespace {

/// The rows of a normalization over the dimensions from `axis` on: `count`
/// rows (the product of x.shape[:axis]) of `size` elements each (the product
/// of x.shape[axis:]); row r is x.data[r * size, (r + 1) * size) and element
/// c of a row pairs with element c of gamma and beta.
struct NormRows {
  int64_t count = 1, size = 1;
  NormRows(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < axis ? count : size) *= shape[d];
  }
};

} // namespace

/// mean_r = sum_c x[r, c] / n, var_r = sum_c (x[r, c] - mean_r)^2 / n,
/// rstd_r = 1 / sqrt(var_r + epsilon),
/// y[r, c] = (x[r, c] - mean_r) rstd_r gamma[c] + beta[c].
LogicalResult Interpreter::run(otc::LayerNormOp op) {
  const Tensor &x = get(op.getInput());
  const Tensor *gamma = getIfPresent(op.getGamma());
  const Tensor *beta = getIfPresent(op.getBeta());
  double eps = op.getEpsilon().convertToDouble();
  NormRows rows(x.shape, op.getAxis());
  Tensor y = zeros(x.shape);
  Tensor mean = zeros(shapeOf(op.getMean()));
  Tensor rstd = zeros(shapeOf(op.getRstd()));
  for (int64_t r = 0; r < rows.count; ++r) {
    const double *row = x.data.data() + r * rows.size;
    double sum = 0.0;
    for (int64_t c = 0; c < rows.size; ++c)
      sum += row[c];
    double mu = sum / static_cast<double>(rows.size);
    double squares = 0.0;
    for (int64_t c = 0; c < rows.size; ++c)
      squares += (row[c] - mu) * (row[c] - mu);
    double var = squares / static_cast<double>(rows.size);
    double rs = 1.0 / std::sqrt(var + eps);
    mean.data[r] = mu;
    rstd.data[r] = rs;
    for (int64_t c = 0; c < rows.size; ++c) {
      double v = (row[c] - mu) * rs;
      if (gamma)
        v *= gamma->data[c];
      if (beta)
        v += beta->data[c];
      y.data[r * rows.size + c] = v;
    }
  }
  set(op.getResult(), std::move(y));
  set(op.getMean(), std::move(mean));
  set(op.getRstd(), std::move(rstd));
  return success();
}

/// With xhat = (x - mean) rstd and g = grad gamma (gamma 1 when absent), per
/// row: dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)); over all rows:
/// dgamma[c] = sum_r grad xhat, dbeta[c] = sum_r grad. The three results
/// always exist. A residual operand is added to dx element by element.
LogicalResult Interpreter::run(otc::LayerNormGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor *residual = getIfPresent(op.getResidual());
  const Tensor &x = get(op.getInput());
  const Tensor *gamma = getIfPresent(op.getGamma());
  const Tensor &mean = get(op.getMean());
  const Tensor &rstd = get(op.getRstd());
  NormRows rows(x.shape, op.getAxis());
  double n = static_cast<double>(rows.size);
  Tensor dx = zeros(x.shape);
  Tensor dgamma = startOfSum(op.getDgammaAcc(), op.getDgamma());
  Tensor dbeta = startOfSum(op.getDbetaAcc(), op.getDbeta());
  std::vector<double> xhat(rows.size), g(rows.size);
  for (int64_t r = 0; r < rows.count; ++r) {
    double meanG = 0.0, meanGXhat = 0.0;
    for (int64_t c = 0; c < rows.size; ++c) {
      int64_t e = r * rows.size + c;
      xhat[c] = (x.data[e] - mean.data[r]) * rstd.data[r];
      g[c] = grad.data[e] * (gamma ? gamma->data[c] : 1.0);
      meanG += g[c] / n;
      meanGXhat += g[c] * xhat[c] / n;
      dgamma.data[c] += grad.data[e] * xhat[c];
      dbeta.data[c] += grad.data[e];
    }
    for (int64_t c = 0; c < rows.size; ++c)
      dx.data[r * rows.size + c] =
          rstd.data[r] * (g[c] - meanG - xhat[c] * meanGXhat);
  }
  if (residual)
    for (size_t e = 0; e < dx.data.size(); ++e)
      dx.data[e] += residual->data[e];
  set(op.getDx(), std::move(dx));
  set(op.getDgamma(), std::move(dgamma));
  set(op.getDbeta(), std::move(dbeta));
  return success();
}

/// rstd_r = 1 / sqrt(sum_c x[r, c]^2 / n + epsilon),
/// y[r, c] = x[r, c] rstd_r gamma[c].
LogicalResult Interpreter::run(otc::RmsNormOp op) {
  const Tensor &x = get(op.getInput());
  const Tensor *gamma = getIfPresent(op.getGamma());
  double eps = op.getEpsilon().convertToDouble();
  NormRows rows(x.shape, op.getAxis());
  Tensor y = zeros(x.shape);
  Tensor rstd = zeros(shapeOf(op.getRstd()));
  for (int64_t r = 0; r < rows.count; ++r) {
    const double *row = x.data.data() + r * rows.size;
    double squares = 0.0;
    for (int64_t c = 0; c < rows.size; ++c)
      squares += row[c] * row[c];
    double rs = 1.0 / std::sqrt(squares / static_cast<double>(rows.size) + eps);
    rstd.data[r] = rs;
    for (int64_t c = 0; c < rows.size; ++c)
      y.data[r * rows.size + c] = row[c] * rs * (gamma ? gamma->data[c] : 1.0);
  }
  set(op.getResult(), std::move(y));
  set(op.getRstd(), std::move(rstd));
  return success();
}

/// With xhat = x rstd and g = grad gamma (gamma 1 when absent), per row:
/// dx = rstd (g - xhat mean_c(g xhat)); dgamma[c] = sum_r grad xhat. Both
/// results always exist. A residual operand is added to dx element by
/// element.
LogicalResult Interpreter::run(otc::RmsNormGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor *residual = getIfPresent(op.getResidual());
  const Tensor &x = get(op.getInput());
  const Tensor *gamma = getIfPresent(op.getGamma());
  const Tensor &rstd = get(op.getRstd());
  NormRows rows(x.shape, op.getAxis());
  double n = static_cast<double>(rows.size);
  Tensor dx = zeros(x.shape);
  Tensor dgamma = startOfSum(op.getDgammaAcc(), op.getDgamma());
  std::vector<double> xhat(rows.size), g(rows.size);
  for (int64_t r = 0; r < rows.count; ++r) {
    double meanGXhat = 0.0;
    for (int64_t c = 0; c < rows.size; ++c) {
      int64_t e = r * rows.size + c;
      xhat[c] = x.data[e] * rstd.data[r];
      g[c] = grad.data[e] * (gamma ? gamma->data[c] : 1.0);
      meanGXhat += g[c] * xhat[c] / n;
      dgamma.data[c] += grad.data[e] * xhat[c];
    }
    for (int64_t c = 0; c < rows.size; ++c)
      dx.data[r * rows.size + c] = rstd.data[r] * (g[c] - xhat[c] * meanGXhat);
  }
  if (residual)
    for (size_t e = 0; e < dx.data.size(); ++e)
      dx.data[e] += residual->data[e];
  set(op.getDx(), std::move(dx));
  set(op.getDgamma(), std::move(dgamma));
  return success();
}

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

/// Over the last dimension, the first R features (R the tables' last
/// dimension) rotate and the others are copied. Feature j < R has the
/// partner k: j + R/2 or j - R/2 (halves), j + 1 or j - 1 (interleaved,
/// j even or odd); j is the first of its pair (sign -1) when j < R/2, or j
/// even. With c and s the tables broadcast to x: y[j] = x[j] c[j] +
/// sign x[k] s[j]; transposed: y[j] = x[j] c[j] - sign x[k] s[k]. Element
/// by element, each a fresh sum.
LogicalResult Interpreter::run(otc::RopeOp op) {
  const Tensor &x = get(op.getInput());
  const Tensor &cos = get(op.getCos());
  const Tensor &sin = get(op.getSin());
  bool transposed = op.getTransposed(), interleaved = op.getInterleaved();
  int64_t rot = cos.shape.back(), h = rot / 2;
  Tensor y = zeros(x.shape);
  for (int64_t e = 0; e < static_cast<int64_t>(x.data.size()); ++e) {
    std::vector<int64_t> index = unravel(e, x.shape);
    int64_t j = index.back();
    if (j >= rot) {
      y.data[e] = x.data[e];
      continue;
    }
    bool first = interleaved ? j % 2 == 0 : j < h;
    int64_t k = interleaved ? (first ? j + 1 : j - 1) : (first ? j + h : j - h);
    double sign = first ? -1.0 : 1.0;
    std::vector<int64_t> other = index;
    other.back() = k;
    double c = cos.data[broadcastSource(index, cos.shape)];
    double sOwn = sin.data[broadcastSource(index, sin.shape)];
    double sOther = sin.data[broadcastSource(other, sin.shape)];
    double partner = x.data[e + (k - j)];
    double rotated =
        transposed ? -sign * partner * sOther : sign * partner * sOwn;
    y.data[e] = x.data[e] * c + rotated;
  }
  set(op.getResult(), std::move(y));
  return success();
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// sqrt(2 / pi), the factor of the tanh approximation of GELU.
static const double kSqrt2OverPi = 0.7978845608028654;
/// The cubic coefficient of the tanh approximation of GELU.
static const double kGeluCubic = 0.044715;

/// gelu(x) with `approximate` "none" or "tanh".
static double gelu(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x *
           (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

/// d gelu(x) / dx:
///   "none": 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi);
///   "tanh": with u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u),
///           0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
static double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi *
                                 (1.0 + 3.0 * kGeluCubic * x * x);
  }
  const double pi = 3.141592653589793;
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
}

/// True for approximate = "tanh", false for "none"; fails on anything else.
static FailureOr<bool> geluTanhForm(Operation *op, StringRef approximate) {
  if (approximate == "tanh")
    return true;
  if (approximate == "none")
    return false;
  return op->emitError("unknown GELU approximation '") << approximate << "'";
}

/// result[i] = gelu(input[i]).
LogicalResult Interpreter::run(otc::GeluOp op) {
  FailureOr<bool> tanhForm = geluTanhForm(op, op.getApproximate());
  if (failed(tanhForm))
    return failure();
  return unary(op, [&](double x) { return gelu(x, *tanhForm); });
}

/// result[i] = grad[i] * gelu'(input[i]).
LogicalResult Interpreter::run(otc::GeluGradOp op) {
  FailureOr<bool> tanhForm = geluTanhForm(op, op.getApproximate());
  if (failed(tanhForm))
    return failure();
  const Tensor &grad = get(op.getGrad());
  const Tensor &x = get(op.getInput());
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = grad.data[i] * geluDerivative(x.data[i], *tanhForm);
  set(op.getResult(), std::move(out));
  return success();
}

/// 1 / (1 + e^-x).
static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// result[i] = x sigmoid(a x) with x = input[i], a = alpha.
LogicalResult Interpreter::run(otc::SiluOp op) {
  const double a = op.getAlpha().convertToDouble();
  return unary(op, [a](double x) { return x * sigmoid(a * x); });
}

/// result[i] = grad[i] s (1 + a x (1 - s)) with x = input[i], a = alpha,
/// s = sigmoid(a x): the derivative of x sigmoid(a x).
LogicalResult Interpreter::run(otc::SiluGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &x = get(op.getInput());
  const double a = op.getAlpha().convertToDouble();
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i) {
    double s = sigmoid(a * x.data[i]);
    out.data[i] = grad.data[i] * s * (1.0 + a * x.data[i] * (1.0 - s));
  }
  set(op.getResult(), std::move(out));
  return success();
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// Row r of the [..., C] logits is the r-th run of C elements, paired with
/// flat element r of the labels. lse_r = log sum_c exp(logits[r, c]) for
/// every row, ignored ones included; loss_r = lse_r - logits[r, label_r]
/// (0 for ignored rows), reduced as the other losses: "none" keeps them in
/// the labels' shape, "sum" adds them, "mean" divides the sum by the number
/// of rows not ignored (NaN when every row is ignored, as 0 / 0).
LogicalResult Interpreter::run(otc::CrossEntropyOp op) {
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t classes = logits.shape.back();
  int64_t rows = labels.data.size();
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, op.getIgnoreIndex());
  if (failed(active))
    return failure();
  Tensor lse = zeros(labels.shape);
  std::vector<double> perRow(rows, 0.0);
  double sum = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = logits.data.data() + r * classes;
    lse.data[r] = logSumExp(row, classes);
    if (!(*active)[r])
      continue;
    perRow[r] = lse.data[r] - row[static_cast<int64_t>(labels.data[r])];
    sum += perRow[r];
    ++counted;
  }
  if (failed(reduceLoss(op, op.getReduction(), perRow, sum, counted,
                        op.getLoss())))
    return failure();
  set(op.getLse(), std::move(lse));
  return success();
}

/// One row of the cross-entropy's gradient: out[c] = g (exp(row[c] - lse) -
/// [c == label]).
static void crossEntropyGradRow(const double *row, int64_t classes, double lse,
                                int64_t label, double g, double *out) {
  for (int64_t c = 0; c < classes; ++c)
    out[c] = g * (std::exp(row[c] - lse) - (c == label ? 1.0 : 0.0));
}

/// result[r, c] = g_r (exp(logits[r, c] - lse_r) - [c == label_r]) with the
/// saved lse_r and g_r the row's share of the incoming gradient: grad[r]
/// ("none"), grad ("sum") or grad / (rows not ignored) ("mean"); 0 for
/// ignored rows.
LogicalResult Interpreter::run(otc::CrossEntropyGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  const Tensor &lse = get(op.getLse());
  int64_t classes = logits.shape.back();
  int64_t rows = labels.data.size();
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  Tensor out = zeros(logits.shape);
  for (int64_t r = 0; r < rows; ++r) {
    if (!counts->active[r])
      continue;
    crossEntropyGradRow(logits.data.data() + r * classes, classes, lse.data[r],
                        static_cast<int64_t>(labels.data[r]),
                        rowGradScale(reduction, grad, r, counts->counted),
                        out.data.data() + r * classes);
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// otc.cross_entropy followed by otc.cross_entropy_grad, written out again:
/// lse_r and row_loss_r = lse_r - logits[r, label_r] (0 for ignored rows),
/// the loss their reduction, dlogits[r, c] = g_r (exp(logits[r, c] - lse_r)
/// - [c == label_r]) with g_r as for otc.cross_entropy_grad.
LogicalResult Interpreter::run(otc::CrossEntropyWithGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t classes = logits.shape.back();
  int64_t rows = labels.data.size();
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  Tensor rowLoss = zeros(labels.shape);
  Tensor dlogits = zeros(logits.shape);
  std::vector<double> perRow(rows, 0.0);
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!counts->active[r])
      continue;
    const double *row = logits.data.data() + r * classes;
    double lse = logSumExp(row, classes);
    auto label = static_cast<int64_t>(labels.data[r]);
    perRow[r] = lse - row[label];
    rowLoss.data[r] = perRow[r];
    sum += perRow[r];
    crossEntropyGradRow(row, classes, lse, label,
                        rowGradScale(reduction, grad, r, counts->counted),
                        dlogits.data.data() + r * classes);
  }
  if (failed(reduceLoss(op, reduction, perRow, sum, counts->counted,
                        op.getLoss())))
    return failure();
  set(op.getRowLoss(), std::move(rowLoss));
  set(op.getDlogits(), std::move(dlogits));
  return success();
}

/// The LM head, its loss and their gradients, unchunked: logits = h wᵀ
/// (+ bias), then otc.cross_entropy_with_grad's rows, dh = dlogits w,
/// dw = dlogitsᵀ h (plus dw_acc where given) and dbias the sum of dlogits'
/// rows. `chunk` (scratch) is zeros.
LogicalResult Interpreter::run(otc::LinearCrossEntropyWithGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &h = get(op.getH());
  const Tensor &w = get(op.getW());
  const Tensor &labels = get(op.getLabels());
  const bool byHidden = op.getWByHidden(); // w [C, V]
  int64_t classes = op.getClasses(), hidden = op.getHidden();
  // w's element for class v and feature c, either way it is stored.
  auto at = [&](int64_t v, int64_t c) {
    return byHidden ? c * classes + v : v * hidden + c;
  };
  int64_t rows = labels.data.size();
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  Tensor rowLoss = zeros(labels.shape);
  Tensor dh = zeros(h.shape), dw = zeros(w.shape), dbias = zeros({classes});
  const Tensor *bias = op.getBias() ? &get(op.getBias()) : nullptr;
  std::vector<double> perRow(rows, 0.0), logits(classes), dlogits(classes);
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!counts->active[r])
      continue;
    const double *x = h.data.data() + r * hidden;
    for (int64_t v = 0; v < classes; ++v) {
      double dot = 0.0;
      for (int64_t c = 0; c < hidden; ++c)
        dot += x[c] * w.data[at(v, c)];
      logits[v] = dot + (bias ? bias->data[v] : 0.0);
    }
    double lse = logSumExp(logits.data(), classes);
    auto label = static_cast<int64_t>(labels.data[r]);
    perRow[r] = lse - logits[label];
    rowLoss.data[r] = perRow[r];
    sum += perRow[r];
    crossEntropyGradRow(logits.data(), classes, lse, label,
                        rowGradScale(reduction, grad, r, counts->counted),
                        dlogits.data());
    for (int64_t v = 0; v < classes; ++v) {
      dbias.data[v] += dlogits[v];
      for (int64_t c = 0; c < hidden; ++c) {
        dh.data[r * hidden + c] += dlogits[v] * w.data[at(v, c)];
        dw.data[at(v, c)] += dlogits[v] * x[c];
      }
    }
  }
  if (failed(reduceLoss(op, reduction, perRow, sum, counts->counted,
                        op.getLoss())))
    return failure();
  set(op.getRowLoss(), std::move(rowLoss));
  set(op.getDh(), std::move(dh));
  if (op.getDwAcc()) {
    const Tensor &acc = get(op.getDwAcc());
    for (size_t i = 0; i < dw.data.size(); ++i)
      dw.data[i] += acc.data[i];
  }
  set(op.getDw(), std::move(dw));
  if (op.getDbias())
    set(op.getDbias(), std::move(dbias));
  ArrayRef<int64_t> chunk = op.getChunk().getType().getShape();
  set(op.getChunk(), zeros(std::vector<int64_t>(chunk.begin(), chunk.end())));
  return success();
}

/// result[c] = sum over the leading indices r of input[r, c].
LogicalResult Interpreter::run(otc::ColumnSumOp op) {
  const Tensor &x = get(op.getInput());
  int64_t cols = x.shape.back();
  int64_t rows = cols ? static_cast<int64_t>(x.data.size()) / cols : 0;
  Tensor sum = startOfSum(op.getAcc(), op.getResult());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      sum.data[c] += x.data[r * cols + c];
  set(op.getResult(), std::move(sum));
  return success();
}
