//===- FusedBodies.cpp - bodies of the fused transformer ops --------------===//
//
// Kernel bodies of the ops of OtcFusedOps.td: attention and its gradient,
// layer and RMS normalization and their gradients, GELU, SiLU and their
// gradients, and the softmax cross-entropy over the last axis with its
// gradient. All arithmetic happens in float whatever the storage type: every
// load is cast to float (an otc_bf16 widens exactly) and every store goes
// through the result's C type (an otc_bf16 rounds to nearest even), so the
// statistics (lse, mean, rstd) may be f32 next to BF16 data.
//
// Work items:
//  - attention: one per query row (b, h, i). A first pass over the keys
//    keeps a running maximum and sum of exponentials and stores the row's
//    log-sum-exp; a second pass recomputes the scores and accumulates the
//    output in a local array of at most kChunk columns (longer heads take
//    more passes), so no row needs scratch memory proportional to S.
//  - attention_grad: one per query row (writes its dq row), then one per key
//    row (writes its dk and dv rows, summing over the query heads of its
//    group and every query row). The two kinds write disjoint results.
//  - layer_norm, rms_norm: one per row; their gradients one per row (dx)
//    followed by one per normalized column (dgamma, dbeta summed over rows).
//  - gelu, silu and their gradients: one per element; each reads all it
//    needs before its store, so the result may alias an input.
//  - cross_entropy: one per row with reduction "none", else a single item
//    that walks the rows in order; cross_entropy_grad: one per row, reading
//    each logit before writing the same element, so the result may take the
//    logits' buffer.
//
// The normalization and attention gradients read rows that other items
// write, so their results must not alias their inputs.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace otc;

namespace {

/// The most head columns one attention pass accumulates in locals.
constexpr int64_t kChunk = 128;

/// The pointer name of ODS operand `index` of `op` (empty when that
/// optional operand is absent).
template <typename OpT>
std::string operandPtr(OpT op, unsigned index, const BodyContext &c) {
  auto [start, length] = op.getODSOperandIndexAndLength(index);
  return length ? c.in[start] : std::string();
}

/// `(float)p[at]`: an element loaded as float.
std::string load(StringRef p, const Twine &at) {
  return ("(float)" + p + "[" + at + "]").str();
}

/// Emits `float <name>`, the float dot product of the `len` elements at `a`
/// and `b` (C pointer expressions).
void emitDot(raw_ostream &os, StringRef ind, StringRef name, StringRef a,
             StringRef b, int64_t len) {
  os << ind << "float " << name << " = 0.0f;\n"
     << ind << "for (int64_t d = 0; d < " << len << "; ++d) " << name
     << " += (float)" << a << "[d] * (float)" << b << "[d];\n";
}

/// Opens a pass over columns [d0, d0 + dn) of a head of `dim` columns with
/// zeroed local accumulators `accs`; the caller closes it with one brace.
void openChunk(raw_ostream &os, int64_t dim, ArrayRef<StringRef> accs) {
  int64_t ch = std::min(dim, kChunk);
  os << "    for (int64_t d0 = 0; d0 < " << dim << "; d0 += " << ch << ") {\n"
     << "      const int64_t dn = " << dim << " - d0 < " << ch << " ? " << dim
     << " - d0 : " << ch << ";\n";
  for (StringRef a : accs)
    os << "      float " << a << "[" << ch << "];\n"
       << "      for (int64_t e = 0; e < dn; ++e) " << a << "[e] = 0.0f;\n";
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// What the attention bodies need to know about an attention op.
struct Attention {
  /// Batch, query heads, key/value heads, queries, keys and head size.
  int64_t b, h, hk, t, s, d;
  bool causal;
  double scale, dropout;
  int64_t stream;
  /// Pointer names of the optional mask and key ("" when absent).
  std::string mask, key;
  /// Strides of the mask broadcast to the scores [B, H, T, S].
  SmallVector<int64_t> maskStrides;
  /// Pointer names and C element types of q, k and v.
  std::string q, k, v, qType, kType, vType;

  /// The offset of mask element (bi, hi, ti, ji) in the broadcast mask.
  std::string maskIndex(StringRef bi, StringRef hi, StringRef ti,
                        StringRef ji) const {
    std::string out;
    StringRef names[] = {bi, hi, ti, ji};
    for (int dim = 0; dim < 4; ++dim) {
      if (!maskStrides[dim])
        continue;
      out += out.empty() ? "" : " + ";
      out += names[dim].str();
      if (maskStrides[dim] != 1)
        out += " * " + std::to_string(maskStrides[dim]);
    }
    return out.empty() ? "0" : out;
  }
};

/// The attention of `op`, whose q, k, v are operands `qIndex` on and whose
/// optional mask and key are ODS operands `maskIndex` and `maskIndex + 1`
/// (shapes, mask and key as the op verifiers guarantee).
template <typename OpT>
Attention attentionOf(OpT op, unsigned qIndex, unsigned maskIndex,
                      const BodyContext &c) {
  ArrayRef<int64_t> q = bodyShapeOf(op.getQ()), k = bodyShapeOf(op.getK());
  Attention a;
  a.b = q[0], a.h = q[1], a.hk = k[1], a.t = q[2], a.s = k[2], a.d = q[3];
  a.causal = op.getCausal();
  a.scale = op.getScale().convertToDouble();
  a.dropout = op.getDropout().convertToDouble();
  a.stream = static_cast<int64_t>(op.getStream());
  a.mask = operandPtr(op, maskIndex, c);
  a.key = operandPtr(op, maskIndex + 1, c);
  if (Value m = op.getMask())
    a.maskStrides = broadcastStrides(bodyShapeOf(m), {a.b, a.h, a.t, a.s});
  a.q = c.in[qIndex], a.k = c.in[qIndex + 1], a.v = c.in[qIndex + 2];
  a.qType = bodyCType(op.getQ());
  a.kType = bodyCType(op.getK());
  a.vType = bodyCType(op.getV());
  return a;
}

/// Emits `float s`, the scaled and masked score of query row `qr` against
/// key row `kr` of query (bi, hi, ti) and key `ji`, inside a loop over keys
/// (a fully masked score `continue`s).
void emitScore(raw_ostream &os, StringRef ind, const Attention &a, StringRef qr,
               StringRef kr, StringRef bi, StringRef hi, StringRef ti,
               StringRef ji) {
  emitDot(os, ind, "s", qr, kr, a.d);
  os << ind << "s = s * " << floatLiteral(a.scale);
  if (!a.mask.empty())
    os << " + " << load(a.mask, a.maskIndex(bi, hi, ti, ji));
  os << ";\n" << ind << "if (s == -INFINITY) continue;\n";
}

/// Emits `const float ks`, the dropout factor of probability number `index`
/// (keep / (1 - ratio), as otc.dropout scales), or nothing without dropout.
/// Returns the factor's C expression.
std::string emitKeepScale(raw_ostream &os, StringRef ind, const Attention &a,
                          StringRef index) {
  if (a.dropout <= 0.0)
    return "1.0f";
  emitDropoutKeep(os, a.key, a.stream, a.dropout, index, ind);
  os << ind << "const float ks = keep ? " << literal(1.0 / (1.0 - a.dropout))
     << "f : 0.0f;\n";
  return "ks";
}

/// Emits the coordinates of query row `i` and the bases of its key and value
/// heads.
void emitQueryRow(raw_ostream &os, const Attention &a) {
  int64_t group = a.h / a.hk;
  os << "    const int64_t bi = i / " << a.h * a.t << ", hq = (i / " << a.t
     << ") % " << a.h;
  // The query's position only matters to the causal test and the mask.
  if (a.causal || !a.mask.empty())
    os << ", ti = i % " << a.t;
  os << ";\n"
     << "    const int64_t kvb = (bi * " << a.hk << " + hq / " << group
     << ") * " << a.s * a.d << ";\n"
     << "    const " << a.qType << "* qr = " << a.q << " + i * " << a.d << ";\n"
     << "    const " << a.kType << "* kh = " << a.k << " + kvb;\n"
     << "    const " << a.vType << "* vh = " << a.v << " + kvb;\n"
     << "    const int64_t jn = " << (a.causal ? "ti + 1" : std::to_string(a.s))
     << ";\n";
}

LogicalResult emitAttention(AttentionOp op, BodyContext &c) {
  const Attention a = attentionOf(op, 0, 3, c);
  emitQueryRow(c.os, a);
  // Pass 1: running maximum and sum of exponentials, then the lse.
  c.os << "    float mx = -INFINITY, se = 0.0f;\n"
       << "    for (int64_t j = 0; j < jn; ++j) {\n"
       << "      const " << a.kType << "* kr = kh + j * " << a.d << ";\n";
  emitScore(c.os, "      ", a, "qr", "kr", "bi", "hq", "ti", "j");
  c.os << "      if (s > mx) { se = se * expf(mx - s) + 1.0f; mx = s; }\n"
       << "      else se += expf(s - mx);\n"
       << "    }\n"
       << "    const float lse = mx + logf(se);\n"
       << "    " << c.out[1] << "[i] = lse;\n";
  // Pass 2 (per chunk of columns): out = sum_j p_j v_j.
  openChunk(c.os, a.d, {"acc"});
  c.os << "      for (int64_t j = 0; j < jn; ++j) {\n"
       << "        const " << a.kType << "* kr = kh + j * " << a.d << ";\n";
  emitScore(c.os, "        ", a, "qr", "kr", "bi", "hq", "ti", "j");
  std::string ks =
      emitKeepScale(c.os, "        ", a, "i * " + std::to_string(a.s) + " + j");
  c.os << "        const float p = expf(s - lse) * " << ks << ";\n"
       << "        const " << a.vType << "* vr = vh + j * " << a.d << " + d0;\n"
       << "        for (int64_t e = 0; e < dn; ++e) acc[e] += p * "
          "(float)vr[e];\n"
       << "      }\n"
       << "      for (int64_t e = 0; e < dn; ++e) " << c.out[0] << "[i * "
       << a.d << " + d0 + e] = acc[e];\n"
       << "    }\n";
  return success();
}

LogicalResult emitAttentionGrad(AttentionGradOp op, BodyContext &c) {
  const Attention a = attentionOf(op, 1, 6, c);
  std::string gType = bodyCType(op.getGrad()),
              oType = bodyCType(op.getOutput());
  StringRef dO = c.in[0], o = c.in[4], lse = c.in[5];
  int64_t queries = a.b * a.h * a.t, group = a.h / a.hk;

  // Query rows: dq_i = scale sum_j P_ij (dP_ij - D_i) k_j.
  c.os << "    if (i < " << queries << ") {\n";
  emitQueryRow(c.os, a);
  c.os << "    const " << gType << "* gr = " << dO << " + i * " << a.d << ";\n"
       << "    const " << oType << "* orow = " << o << " + i * " << a.d << ";\n"
       << "    const float lse = " << load(lse, "i") << ";\n";
  emitDot(c.os, "    ", "di", "gr", "orow", a.d);
  openChunk(c.os, a.d, {"acc"});
  c.os << "      for (int64_t j = 0; j < jn; ++j) {\n"
       << "        const " << a.kType << "* kr = kh + j * " << a.d << ";\n";
  emitScore(c.os, "        ", a, "qr", "kr", "bi", "hq", "ti", "j");
  c.os << "        const float p = expf(s - lse);\n";
  emitDot(c.os, "        ", "dp", "gr",
          "(vh + j * " + std::to_string(a.d) + ")", a.d);
  std::string ks =
      emitKeepScale(c.os, "        ", a, "i * " + std::to_string(a.s) + " + j");
  c.os << "        const float ds = p * (dp * " << ks << " - di);\n"
       << "        for (int64_t e = 0; e < dn; ++e) acc[e] += ds * "
          "(float)kr[d0 + e];\n"
       << "      }\n"
       << "      for (int64_t e = 0; e < dn; ++e) " << c.out[0] << "[i * "
       << a.d << " + d0 + e] = " << floatLiteral(a.scale) << " * acc[e];\n"
       << "    }\n";

  // Key rows: dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P'_ij dO_i over the
  // query heads of the group and all query rows.
  c.os << "    } else {\n"
       << "    const int64_t r = i - " << queries << ";\n"
       << "    const int64_t bi = r / " << a.hk * a.s << ", hk = (r / " << a.s
       << ") % " << a.hk << ", j = r % " << a.s << ";\n"
       << "    const " << a.kType << "* kr = " << a.k << " + r * " << a.d
       << ";\n"
       << "    const " << a.vType << "* vr = " << a.v << " + r * " << a.d
       << ";\n";
  openChunk(c.os, a.d, {"ak", "av"});
  c.os << "      for (int64_t hq = hk * " << group << "; hq < (hk + 1) * "
       << group << "; ++hq)\n"
       << "      for (int64_t ti = " << (a.causal ? "j" : "0") << "; ti < "
       << a.t << "; ++ti) {\n"
       << "        const int64_t row = (bi * " << a.h << " + hq) * " << a.t
       << " + ti;\n"
       << "        const " << a.qType << "* qr = " << a.q << " + row * " << a.d
       << ";\n"
       << "        const " << gType << "* gr = " << dO << " + row * " << a.d
       << ";\n"
       << "        const " << oType << "* orow = " << o << " + row * " << a.d
       << ";\n";
  emitScore(c.os, "        ", a, "qr", "kr", "bi", "hq", "ti", "j");
  c.os << "        const float p = expf(s - " << load(lse, "row") << ");\n";
  emitDot(c.os, "        ", "dp", "gr", "vr", a.d);
  emitDot(c.os, "        ", "di", "gr", "orow", a.d);
  ks = emitKeepScale(c.os, "        ", a,
                     "row * " + std::to_string(a.s) + " + j");
  c.os << "        const float ds = p * (dp * " << ks << " - di);\n"
       << "        const float pk = p * " << ks << ";\n"
       << "        for (int64_t e = 0; e < dn; ++e) {\n"
       << "          ak[e] += ds * (float)qr[d0 + e];\n"
       << "          av[e] += pk * (float)gr[d0 + e];\n"
       << "        }\n"
       << "      }\n"
       << "      for (int64_t e = 0; e < dn; ++e) {\n"
       << "        " << c.out[1] << "[r * " << a.d
       << " + d0 + e] = " << floatLiteral(a.scale) << " * ak[e];\n"
       << "        " << c.out[2] << "[r * " << a.d << " + d0 + e] = av[e];\n"
       << "      }\n"
       << "    }\n"
       << "    }\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

/// Rows and row length of a normalization of `x` from `axis` on.
struct NormShape {
  int64_t rows, cols;
};

NormShape normShapeOf(Value x, int64_t axis) {
  ArrayRef<int64_t> s = bodyShapeOf(x);
  return {numElements(s.take_front(axis)), numElements(s.drop_front(axis))};
}

/// `x` as a float C expression of a division by the row length.
std::string perCol(StringRef x, int64_t cols) {
  return (x + " / " + std::to_string(cols) + ".0f").str();
}

/// layer_norm (`rms` false) or rms_norm (`rms` true) of row `i`.
LogicalResult emitNorm(Operation *op, StringRef x, StringRef gamma,
                       StringRef beta, NormShape n, double eps, bool rms,
                       BodyContext &c) {
  std::string xType = bodyCType(op->getOperand(0));
  c.os << "    const " << xType << "* x = " << x << " + i * " << n.cols
       << ";\n";
  if (rms) {
    c.os << "    const float mean = 0.0f;\n";
  } else {
    c.os << "    float sum = 0.0f;\n"
         << "    for (int64_t k = 0; k < " << n.cols
         << "; ++k) sum += (float)x[k];\n"
         << "    const float mean = " << perCol("sum", n.cols) << ";\n";
  }
  c.os << "    float sq = 0.0f;\n"
       << "    for (int64_t k = 0; k < " << n.cols
       << "; ++k) { const float xc = (float)x[k] - mean; sq += xc * xc; }\n"
       << "    const float rstd = 1.0f / sqrtf(" << perCol("sq", n.cols)
       << " + " << floatLiteral(eps) << ");\n";
  if (!rms)
    c.os << "    " << c.out[1] << "[i] = mean;\n";
  c.os << "    " << c.out[rms ? 1 : 2] << "[i] = rstd;\n"
       << "    for (int64_t k = 0; k < " << n.cols << "; ++k) {\n"
       << "      float yk = ((float)x[k] - mean) * rstd;\n";
  if (!gamma.empty())
    c.os << "      yk *= " << load(gamma, "k") << ";\n";
  if (!beta.empty())
    c.os << "      yk += " << load(beta, "k") << ";\n";
  c.os << "      " << c.out[0] << "[i * " << n.cols << " + k] = yk;\n"
       << "    }\n";
  return success();
}

/// layer_norm_grad (`mean` given) or rms_norm_grad (`mean` empty): dx of row
/// `i` for the first `rows` items, then dgamma (and dbeta for layer_norm) of
/// column `i - rows`.
LogicalResult emitNormGrad(StringRef gamma, StringRef mean, StringRef rstd,
                           NormShape n, BodyContext &c) {
  StringRef grad = c.in[0], x = c.in[1];
  bool rms = mean.empty();
  auto xhat = [&](StringRef at, StringRef row) {
    std::string m = rms ? "" : " - " + load(mean, row);
    return "(" + load(x, at) + m + ") * " + load(rstd, row);
  };
  std::string gk = load(grad, "i * " + std::to_string(n.cols) + " + k");
  if (!gamma.empty())
    gk += " * " + load(gamma, "k");
  std::string at = "i * " + std::to_string(n.cols) + " + k";
  c.os << "    if (i < " << n.rows << ") {\n"
       << "    float sg = 0.0f, sgx = 0.0f;\n"
       << "    for (int64_t k = 0; k < " << n.cols << "; ++k) {\n"
       << "      const float gk = " << gk << ", xh = " << xhat(at, "i") << ";\n"
       << "      sg += gk; sgx += gk * xh;\n"
       << "    }\n"
       << "    sg = " << perCol("sg", n.cols)
       << "; sgx = " << perCol("sgx", n.cols) << ";\n"
       << "    for (int64_t k = 0; k < " << n.cols << "; ++k) {\n"
       << "      const float gk = " << gk << ", xh = " << xhat(at, "i") << ";\n"
       << "      " << c.out[0] << "[" << at << "] = " << load(rstd, "i")
       << " * (gk" << (rms ? "" : " - sg") << " - xh * sgx);\n"
       << "    }\n"
       << "    } else {\n"
       << "    const int64_t col = i - " << n.rows << ";\n"
       << "    float dg = 0.0f" << (rms ? "" : ", db = 0.0f") << ";\n"
       << "    for (int64_t r = 0; r < " << n.rows << "; ++r) {\n"
       << "      const int64_t at = r * " << n.cols << " + col;\n"
       << "      const float gv = " << load(grad, "at") << ";\n"
       << "      dg += gv * " << xhat("at", "r") << ";"
       << (rms ? "" : " db += gv;") << "\n    }\n"
       << "    " << c.out[1] << "[col] = dg;\n";
  if (!rms)
    c.os << "    " << c.out[2] << "[col] = db;\n";
  c.os << "    }\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// 1 / sqrt(2), sqrt(2 / pi) and 1 / sqrt(2 pi).
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

/// gelu (`grad` false) or gelu_grad of element `i`.
LogicalResult emitGelu(Operation *op, StringRef approximate, bool grad,
                       BodyContext &c) {
  StringRef x = c.in[grad ? 1 : 0];
  if (grad)
    c.os << "    const float g = " << load(c.in[0], "i") << ";\n";
  c.os << "    const float x = " << load(x, "i") << ";\n";
  if (approximate == "tanh") {
    c.os << "    const float u = " << floatLiteral(kSqrt2OverPi) << " * (x + "
         << floatLiteral(kGeluCubic) << " * x * x * x);\n"
         << "    const float th = tanhf(u);\n";
    if (grad)
      c.os << "    const float du = " << floatLiteral(kSqrt2OverPi)
           << " * (1.0f + " << floatLiteral(3 * kGeluCubic) << " * x * x);\n"
           << "    " << c.out[0]
           << "[i] = g * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * "
              "du);\n";
    else
      c.os << "    " << c.out[0] << "[i] = 0.5f * x * (1.0f + th);\n";
  } else if (approximate == "none") {
    c.os << "    const float cdf = 0.5f * (1.0f + erff(x * "
         << floatLiteral(kInvSqrt2) << "));\n";
    if (grad)
      c.os << "    " << c.out[0] << "[i] = g * (cdf + x * "
           << floatLiteral(kInvSqrt2Pi) << " * expf(-0.5f * x * x));\n";
    else
      c.os << "    " << c.out[0] << "[i] = x * cdf;\n";
  } else {
    return op->emitOpError("unknown approximation '") << approximate << "'";
  }
  return success();
}

/// silu (`grad` false) or silu_grad of element `i`.
LogicalResult emitSilu(bool grad, BodyContext &c) {
  if (grad)
    c.os << "    const float g = " << load(c.in[0], "i") << ";\n";
  c.os << "    const float x = " << load(c.in[grad ? 1 : 0], "i") << ";\n"
       << "    const float sg = 1.0f / (1.0f + expf(-x));\n"
       << "    " << c.out[0]
       << "[i] = " << (grad ? "g * sg * (1.0f + x * (1.0f - sg))" : "x * sg")
       << ";\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// Rows and classes of [..., C] logits.
NormShape rowsOf(Value logits) {
  ArrayRef<int64_t> s = bodyShapeOf(logits);
  return {numElements(s.drop_back()), s.back()};
}

/// Emits `z`, row `row` of the logits, and `lse`, its log-sum-exp.
void emitRowLse(raw_ostream &os, StringRef ind, StringRef logits,
                StringRef type, StringRef row, int64_t classes) {
  os << ind << "const " << type << "* z = " << logits << " + " << row << " * "
     << classes << ";\n"
     << ind << "float mx = (float)z[0];\n"
     << ind << "for (int64_t k = 1; k < " << classes
     << "; ++k) { const float v = (float)z[k]; mx = v > mx ? v : mx; }\n"
     << ind << "float se = 0.0f;\n"
     << ind << "for (int64_t k = 0; k < " << classes
     << "; ++k) se += expf((float)z[k] - mx);\n"
     << ind << "const float lse = mx + logf(se);\n";
}

LogicalResult emitCrossEntropy(CrossEntropyOp op, BodyContext &c) {
  NormShape n = rowsOf(op.getLogits());
  std::string type = bodyCType(op.getLogits());
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  StringRef red = op.getReduction();
  if (red == "none") {
    emitRowLse(c.os, "    ", c.in[0], type, "i", n.cols);
    c.os << "    const int64_t y = (int64_t)" << c.in[1] << "[i];\n"
         << "    " << c.out[1] << "[i] = lse;\n"
         << "    " << c.out[0] << "[i] = " << ignoredTest(ignore, "y")
         << " ? 0.0f : lse - (float)z[y];\n";
    return success();
  }
  if (red != "mean" && red != "sum")
    return op.emitOpError("unknown reduction '") << red << "'";
  c.os << "    float total = 0.0f; int64_t count = 0;\n"
       << "    for (int64_t n = 0; n < " << n.rows << "; ++n) {\n";
  emitRowLse(c.os, "      ", c.in[0], type, "n", n.cols);
  c.os << "      " << c.out[1] << "[n] = lse;\n"
       << "      const int64_t y = (int64_t)" << c.in[1] << "[n];\n"
       << "      if (" << ignoredTest(ignore, "y") << ") continue;\n"
       << "      total += lse - (float)z[y]; ++count;\n"
       << "    }\n";
  // With every row ignored the mean is 0 / 0: NaN, as in PyTorch.
  if (red == "mean")
    c.os << "    " << c.out[0] << "[0] = total / (float)count;\n";
  else
    c.os << "    " << c.out[0] << "[0] = total;\n";
  return success();
}

LogicalResult emitCrossEntropyGrad(CrossEntropyGradOp op, BodyContext &c) {
  NormShape n = rowsOf(op.getLogits());
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  StringRef red = op.getReduction();
  if (red != "mean" && red != "sum" && red != "none")
    return op.emitOpError("unknown reduction '") << red << "'";
  StringRef grad = c.in[0], labels = c.in[2];
  c.os << "    const " << bodyCType(op.getLogits()) << "* z = " << c.in[1]
       << " + i * " << n.cols << ";\n"
       << "    " << bodyCType(op.getResult()) << "* dz = " << c.out[0]
       << " + i * " << n.cols << ";\n"
       << "    const int64_t y = (int64_t)" << labels << "[i];\n"
       << "    if (" << ignoredTest(ignore, "y") << ") {\n"
       << "      for (int64_t k = 0; k < " << n.cols << "; ++k) dz[k] = 0.0f;\n"
       << "    } else {\n";
  emitRowGradScale(grad, labels, n.rows, ignore, red, c);
  c.os << "      const float lse = " << load(c.in[3], "i") << ";\n"
       << "      for (int64_t k = 0; k < " << n.cols << "; ++k) {\n"
       << "        const float zk = (float)z[k];\n"
       << "        dz[k] = g * (expf(zk - lse) - (k == y ? 1.0f : 0.0f));\n"
       << "      }\n"
       << "    }\n";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::optional<int64_t> otc::fusedWorkItems(Operation *op) {
  return TypeSwitch<Operation *, std::optional<int64_t>>(op)
      .Case([](AttentionOp o) -> int64_t { return bodyNumel(o.getLse()); })
      .Case([](AttentionGradOp o) -> int64_t {
        ArrayRef<int64_t> k = bodyShapeOf(o.getK());
        return bodyNumel(o.getLse()) + k[0] * k[1] * k[2];
      })
      .Case<LayerNormOp, RmsNormOp>([](auto o) -> int64_t {
        return normShapeOf(o.getInput(), o.getAxis()).rows;
      })
      .Case<LayerNormGradOp, RmsNormGradOp>([](auto o) -> int64_t {
        NormShape n = normShapeOf(o.getInput(), o.getAxis());
        return n.rows + n.cols;
      })
      .Case<GeluOp, GeluGradOp, SiluOp, SiluGradOp>(
          [](auto o) -> int64_t { return bodyNumel(o.getResult()); })
      .Case([](CrossEntropyOp o) -> int64_t {
        return o.getReduction() == "none" ? rowsOf(o.getLogits()).rows : 1;
      })
      .Case([](CrossEntropyGradOp o) -> int64_t {
        return rowsOf(o.getLogits()).rows;
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<LogicalResult> otc::emitFusedBody(Operation *op, BodyContext &c) {
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AttentionOp o) { return emitAttention(o, c); })
      .Case([&](AttentionGradOp o) { return emitAttentionGrad(o, c); })
      .Case([&](LayerNormOp o) {
        return emitNorm(o, c.in[0], operandPtr(o, 1, c), operandPtr(o, 2, c),
                        normShapeOf(o.getInput(), o.getAxis()),
                        o.getEpsilon().convertToDouble(), /*rms=*/false, c);
      })
      .Case([&](RmsNormOp o) {
        return emitNorm(o, c.in[0], operandPtr(o, 1, c), "",
                        normShapeOf(o.getInput(), o.getAxis()),
                        o.getEpsilon().convertToDouble(), /*rms=*/true, c);
      })
      .Case([&](LayerNormGradOp o) {
        return emitNormGrad(operandPtr(o, 2, c), operandPtr(o, 3, c),
                            operandPtr(o, 4, c),
                            normShapeOf(o.getInput(), o.getAxis()), c);
      })
      .Case([&](RmsNormGradOp o) {
        return emitNormGrad(operandPtr(o, 2, c), "", operandPtr(o, 3, c),
                            normShapeOf(o.getInput(), o.getAxis()), c);
      })
      .Case([&](GeluOp o) {
        return emitGelu(o, o.getApproximate(), /*grad=*/false, c);
      })
      .Case([&](GeluGradOp o) {
        return emitGelu(o, o.getApproximate(), /*grad=*/true, c);
      })
      .Case([&](SiluOp) { return emitSilu(/*grad=*/false, c); })
      .Case([&](SiluGradOp) { return emitSilu(/*grad=*/true, c); })
      .Case([&](CrossEntropyOp o) { return emitCrossEntropy(o, c); })
      .Case([&](CrossEntropyGradOp o) { return emitCrossEntropyGrad(o, c); })
      .Default([](Operation *) { return std::nullopt; });
}
