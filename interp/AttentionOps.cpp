//===- AttentionOps.cpp - attention of the reference interpreter ----------===//
//
// otc.attention and otc.attention_grad, written from the math of their
// description as plain loops, in double precision: attention forms every
// score of a row and normalizes them with the row's log-sum-exp (no
// blocking, no online softmax); its gradient rebuilds the probabilities from
// the saved `lse` and applies the chain rule row by row, never reading the
// forward's probabilities, so a gradient kernel that is wrong about what the
// forward saved fails the gradient checks. The other fused ops:
// FusedOps.cpp.
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
  /// window (nor after it either when not causal: a bidirectional window),
  /// nor hidden by a key padding.
  bool visible(int64_t b, int64_t i, int64_t j) const {
    if (causal && j > i)
      return false;
    if (window > 0 && (i - j >= window || j - i >= window))
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
