//===- FusedOps.cpp - fused transformer ops of the reference interpreter --===//
//
// The ops of ir/OtcFusedOps.td: attention, layer and RMS normalization, GELU,
// SiLU, the rotary embedding and cross-entropy, and their gradient kernels.
// Each one is written from the math of its description as plain loops over the
// elements, in double precision, without the blocking, online softmax or reuse
// of buffers that a fast kernel would use: attention forms every score of a row
// and normalizes them with the row's log-sum-exp, its gradient rebuilds the
// probabilities from the saved `lse` and applies the chain rule row by row,
// and the normalizations work on each row of the flattened trailing
// dimensions. The gradients read only the operands that their op lists (for
// attention: never the forward's probabilities), so a gradient kernel that is
// wrong about what the forward saved fails the gradient checks.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"

#include <cmath>
#include <limits>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// What attention and its gradient share: the shapes, the attributes and the
/// operands that rebuild one row of scores and its dropout factors.
struct AttentionProblem {
  int64_t batch, heads, kvHeads, queries, keys, depth;
  const Tensor *q, *k, *v, *mask;
  bool causal;
  int64_t window = 0;
  /// The mask is a key padding [B|1, 1, 1, S]: a fill hides its key.
  bool keyPadding = false;
  double scale, dropout;
  /// Soft-capped scores: c tanh(s / c) before the mask (0: not capped).
  double softcap = 0.0;
  uint64_t key, stream;

  /// Key/value head read by query head `h` (grouped-query attention).
  int64_t kvHead(int64_t h) const { return h / (heads / kvHeads); }

  /// Element (b, h, t, d) of a [B, heads, T, D] tensor.
  static int64_t at4(int64_t b, int64_t h, int64_t t, int64_t d, int64_t nh,
                     int64_t nt, int64_t nd) {
    return ((b * nh + h) * nt + t) * nd + d;
  }
  /// Stored [B, T, H, D] (layouts "bthd" and "packed") rather than
  /// [B, H, T, D].
  bool bthd = false;
  /// Layout "packed": q, k and v are one tensor whose rows hold `rowHeads`
  /// = H + 2 Hk heads, q's from head 0, k's from H, v's from H + Hk.
  bool packed = false;
  int64_t rowHeads = 0;
  /// Element (b, h, i, d) of the output and of its gradient.
  int64_t outAt(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return bthd ? at4(b, i, h, d, queries, heads, depth)
                : at4(b, h, i, d, heads, queries, depth);
  }
  int64_t qAt(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return packed ? at4(b, i, h, d, queries, rowHeads, depth)
                  : outAt(b, h, i, d);
  }
  /// Element (b, h, j, d) of k (`first` 0) or v (`first` Hk): a packed
  /// tensor's head H + first + h.
  int64_t kvAt(int64_t b, int64_t h, int64_t j, int64_t d,
               int64_t first) const {
    if (packed)
      return at4(b, j, heads + first + h, d, keys, rowHeads, depth);
    return bthd ? at4(b, j, h, d, keys, kvHeads, depth)
                : at4(b, h, j, d, kvHeads, keys, depth);
  }
  int64_t kAt(int64_t b, int64_t h, int64_t j, int64_t d) const {
    return kvAt(b, h, j, d, 0);
  }
  int64_t vAt(int64_t b, int64_t h, int64_t j, int64_t d) const {
    return kvAt(b, h, j, d, kvHeads);
  }

  /// A key padding's value at or below this hides its key: a fill of at
  /// most -1e4, -9984 once rounded to BF16.
  static constexpr double kPaddingHides = -9984.0;

  /// True when key j is visible from query i of batch entry b: not after it
  /// under `causal`, nor `window` or more keys before it under a sliding
  /// window, nor hidden by a key padding.
  bool visible(int64_t b, int64_t i, int64_t j) const {
    if (causal && (j > i || (window > 0 && i - j >= window)))
      return false;
    if (keyPadding) {
      int64_t index[4] = {b, 0, 0, j};
      return mask->data[broadcastSource(index, mask->shape)] > kPaddingHides;
    }
    return true;
  }

  /// scale * q . k of (b, h, i, j).
  double scaledDot(int64_t b, int64_t h, int64_t i, int64_t j) const {
    int64_t kh = kvHead(h);
    double dot = 0.0;
    for (int64_t d = 0; d < depth; ++d)
      dot += q->data[qAt(b, h, i, d)] * k->data[kAt(b, kh, j, d)];
    return scale * dot;
  }

  /// The derivative of the soft cap at (b, h, i, j): 1 - tanh^2(s / c)
  /// (1 without a cap).
  double capSlope(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (softcap <= 0.0)
      return 1.0;
    double t = std::tanh(scaledDot(b, h, i, j) / softcap);
    return 1.0 - t * t;
  }

  /// The score of (b, h, i, j): scale * q . k (soft-capped: c tanh(. / c))
  /// plus the broadcast mask. Only meaningful for visible pairs.
  double score(int64_t b, int64_t h, int64_t i, int64_t j) const {
    double s = scaledDot(b, h, i, j);
    if (softcap > 0.0)
      s = softcap * std::tanh(s / softcap);
    if (mask) {
      int64_t index[4] = {b, h, i, j};
      s += mask->data[broadcastSource(index, mask->shape)];
    }
    return s;
  }

  /// The factor dropout applies to probability (b, h, i, j): keep / (1 - p)
  /// with keep drawn for flat element ((b H + h) T + i) S + j of the
  /// [B, H, T, S] probabilities, as otc.dropout would; 1 without dropout.
  double dropFactor(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (dropout <= 0.0)
      return 1.0;
    uint64_t flat =
        static_cast<uint64_t>(at4(b, h, i, j, heads, queries, keys));
    return otc::interp::dropoutKeep(key, stream, flat, dropout)
               ? 1.0 / (1.0 - dropout)
               : 0.0;
  }
};

} // namespace

/// Reads the shapes, attributes and operands common to otc.attention and
/// otc.attention_grad.
/// `outShape` is the output's: packed, it gives the query heads.
template <typename OpT>
static AttentionProblem attentionProblem(OpT op, const Tensor &q,
                                         const Tensor &k, const Tensor &v,
                                         const Tensor *mask, const Tensor *key,
                                         ArrayRef<int64_t> outShape) {
  AttentionProblem p;
  p.packed = op.getLayout() == "packed";
  p.bthd = p.packed || op.getLayout() == "bthd";
  int hAxis = p.bthd ? 2 : 1, tAxis = p.bthd ? 1 : 2;
  p.batch = q.shape[0];
  p.heads = outShape[hAxis];
  p.queries = q.shape[tAxis];
  p.depth = q.shape[3];
  p.kvHeads = p.packed ? (q.shape[2] - p.heads) / 2 : k.shape[hAxis];
  p.rowHeads = q.shape[2];
  p.keys = k.shape[tAxis];
  p.q = &q;
  p.k = &k;
  p.v = &v;
  p.mask = mask;
  p.causal = op.getCausal();
  p.window = op.getWindow();
  p.keyPadding = op.getKeyPadding() && mask;
  p.scale = op.getScale().convertToDouble();
  p.softcap = op.getSoftcap().convertToDouble();
  p.dropout = op.getDropout().convertToDouble();
  p.key = key ? static_cast<uint64_t>(static_cast<int64_t>(key->data[0])) : 0;
  p.stream = static_cast<uint64_t>(op.getStream());
  return p;
}

/// For every (b, h, i): s_j = scale * q_i . k_j + mask (j visible),
/// lse = log sum_j exp(s_j) over the visible j (plus exp(sinks[h]) with
/// sinks), prob_j = exp(s_j - lse) (0 for hidden j) times the dropout
/// factor, output_i = sum_j prob_j v_j. Without sinks, a row whose scores
/// are all -inf gets lse = -inf and a NaN output, like otc.softmax of such
/// a row; with them, lse = sinks[h] and zeros. A row that sees no key (a key
/// padding hides its keys) gives zeros and lse = sinks[h], or +inf without
/// sinks: exp(s - lse) is then 0 for every score.
LogicalResult Interpreter::run(otc::AttentionOp op) {
  const Tensor &q = get(op.getQ());
  const Tensor &k = get(op.getK());
  const Tensor &v = get(op.getV());
  const Tensor *mask = getIfPresent(op.getMask());
  const Tensor *key = getIfPresent(op.getKey());
  std::vector<int64_t> outShape = shapeOf(op.getOutput());
  AttentionProblem p = attentionProblem(op, q, k, v, mask, key, outShape);
  const Tensor *sinks = getIfPresent(op.getSinks());
  if (p.dropout > 0.0 && !key)
    return op.emitError("dropout needs a key");
  Tensor out = zeros(outShape);
  Tensor lse = zeros(shapeOf(op.getLse()));
  std::vector<double> s(p.keys);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      int64_t kh = p.kvHead(h);
      for (int64_t i = 0; i < p.queries; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        bool seesKey = false;
        for (int64_t j = 0; j < p.keys; ++j) {
          if (!p.visible(b, i, j))
            continue;
          seesKey = true;
          s[j] = p.score(b, h, i, j);
          max = std::max(max, s[j]);
        }
        double rowLse = std::numeric_limits<double>::infinity();
        if (seesKey || sinks) {
          if (sinks)
            max = std::max(max, sinks->data[h]);
          double sum = sinks ? std::exp(sinks->data[h] - max) : 0.0;
          for (int64_t j = 0; j < p.keys; ++j)
            if (p.visible(b, i, j))
              sum += std::exp(s[j] - max);
          rowLse = max + std::log(sum);
        }
        lse.data[(b * p.heads + h) * p.queries + i] = rowLse;
        for (int64_t j = 0; j < p.keys; ++j) {
          if (!p.visible(b, i, j))
            continue;
          double prob = std::exp(s[j] - rowLse) * p.dropFactor(b, h, i, j);
          for (int64_t d = 0; d < p.depth; ++d)
            out.data[p.outAt(b, h, i, d)] += prob * v.data[p.vAt(b, kh, j, d)];
        }
      }
    }
  }
  set(op.getOutput(), std::move(out));
  set(op.getLse(), std::move(lse));
  return success();
}

/// For every (b, h, i), with P_j = exp(s_j - lse_i) (0 for hidden j) and m_j
/// the dropout factor (dS_j also times the soft cap's slope 1 - tanh^2):
///   dV[kv head, j] += P_j m_j dO_i        (summed over the heads of a group)
///   dP_j = m_j (dO_i . v_j),  D_i = sum_j P_j dP_j,  dS_j = P_j (dP_j - D_i)
///   dQ_i = scale sum_j dS_j k_j,  dK[kv head, j] += scale dS_j q_i.
/// D_i is summed from its definition; the forward output (whose dot product
/// with dO_i equals it) is not read. With mask_grad, dS before the soft cap's
/// slope (the gradient of the capped scores, to which the mask is added) is
/// a fourth result. With sinks, their gradient is the last result:
///   dsinks[h] = -sum over (b, i) of exp(sinks[h] - lse_i) D_i
/// (a sink moves every probability of its row by -P_j exp(sinks[h] - lse)).

LogicalResult Interpreter::run(otc::AttentionGradOp op) {
  const Tensor &dO = get(op.getGrad());
  const Tensor &q = get(op.getQ());
  const Tensor &k = get(op.getK());
  const Tensor &v = get(op.getV());
  const Tensor &lse = get(op.getLse());
  const Tensor *mask = getIfPresent(op.getMask());
  const Tensor *key = getIfPresent(op.getKey());
  AttentionProblem p =
      attentionProblem(op, q, k, v, mask, key, shapeOf(op.getOutput()));
  if (p.dropout > 0.0 && !key)
    return op.emitError("dropout needs a key");
  // Packed, the three gradients are parts of one tensor.
  Tensor dq = zeros(q.shape), dk, dv;
  if (!p.packed) {
    dk = zeros(k.shape);
    dv = zeros(v.shape);
  }
  Tensor &dkOut = p.packed ? dq : dk, &dvOut = p.packed ? dq : dv;
  Tensor dscores;
  if (op.getMaskGrad())
    dscores = zeros({p.batch, p.heads, p.queries, p.keys});
  const Tensor *sinks = getIfPresent(op.getSinks());
  Tensor dsinks;
  if (sinks)
    dsinks = zeros({p.heads});
  std::vector<double> prob(p.keys), dP(p.keys);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      int64_t kh = p.kvHead(h);
      for (int64_t i = 0; i < p.queries; ++i) {
        double rowLse = lse.data[(b * p.heads + h) * p.queries + i];
        double rowD = 0.0;
        for (int64_t j = 0; j < p.keys; ++j) {
          prob[j] = 0.0;
          dP[j] = 0.0;
          if (!p.visible(b, i, j))
            continue;
          prob[j] = std::exp(p.score(b, h, i, j) - rowLse);
          double m = p.dropFactor(b, h, i, j);
          double dOv = 0.0;
          for (int64_t d = 0; d < p.depth; ++d) {
            double g = dO.data[p.outAt(b, h, i, d)];
            dvOut.data[p.vAt(b, kh, j, d)] += prob[j] * m * g;
            dOv += g * v.data[p.vAt(b, kh, j, d)];
          }
          dP[j] = m * dOv;
          rowD += prob[j] * dP[j];
        }
        if (sinks)
          dsinks.data[h] -= std::exp(sinks->data[h] - rowLse) * rowD;
        for (int64_t j = 0; j < p.keys; ++j) {
          double dS = prob[j] * (dP[j] - rowD);
          if (op.getMaskGrad())
            dscores.data[p.at4(b, h, i, j, p.heads, p.queries, p.keys)] = dS;
          if (dS != 0.0)
            dS *= p.capSlope(b, h, i, j);
          for (int64_t d = 0; d < p.depth; ++d) {
            dq.data[p.qAt(b, h, i, d)] +=
                p.scale * dS * k.data[p.kAt(b, kh, j, d)];
            dkOut.data[p.kAt(b, kh, j, d)] +=
                p.scale * dS * q.data[p.qAt(b, h, i, d)];
          }
        }
      }
    }
  }
  if (sinks)
    set(op.getDsinks(), std::move(dsinks));
  if (p.packed) {
    set(op.getGrads()[0], std::move(dq));
    return success();
  }
  set(op.getDq(), std::move(dq));
  set(op.getDk(), std::move(dk));
  set(op.getDv(), std::move(dv));
  if (op.getMaskGrad())
    set(op.getDscores(), std::move(dscores));
  return success();
}

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

/// The LM head, its loss and their gradients, unchunked: logits = h wᵀ,
/// then otc.cross_entropy_with_grad's rows, dh = dlogits w and
/// dw = dlogitsᵀ h (plus dw_acc where given). `chunk` (scratch) is zeros.
LogicalResult Interpreter::run(otc::LinearCrossEntropyWithGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &h = get(op.getH());
  const Tensor &w = get(op.getW());
  const Tensor &labels = get(op.getLabels());
  int64_t classes = w.shape[0], hidden = w.shape[1];
  int64_t rows = labels.data.size();
  StringRef reduction = op.getReduction();
  FailureOr<GradRows> counts =
      gradRows(op, labels, classes, op.getIgnoreIndex(), reduction);
  if (failed(counts))
    return failure();
  Tensor rowLoss = zeros(labels.shape);
  Tensor dh = zeros(h.shape), dw = zeros(w.shape);
  std::vector<double> perRow(rows, 0.0), logits(classes), dlogits(classes);
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!counts->active[r])
      continue;
    const double *x = h.data.data() + r * hidden;
    for (int64_t v = 0; v < classes; ++v) {
      double dot = 0.0;
      for (int64_t c = 0; c < hidden; ++c)
        dot += x[c] * w.data[v * hidden + c];
      logits[v] = dot;
    }
    double lse = logSumExp(logits.data(), classes);
    auto label = static_cast<int64_t>(labels.data[r]);
    perRow[r] = lse - logits[label];
    rowLoss.data[r] = perRow[r];
    sum += perRow[r];
    crossEntropyGradRow(logits.data(), classes, lse, label,
                        rowGradScale(reduction, grad, r, counts->counted),
                        dlogits.data());
    for (int64_t v = 0; v < classes; ++v)
      for (int64_t c = 0; c < hidden; ++c) {
        dh.data[r * hidden + c] += dlogits[v] * w.data[v * hidden + c];
        dw.data[v * hidden + c] += dlogits[v] * x[c];
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
