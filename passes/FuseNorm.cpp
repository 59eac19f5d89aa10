//===- FuseNorm.cpp - layer and RMS normalization recognized --------------===//
//
// otc-fuse-patterns' recognizer of layer and RMS normalization as exporters
// decompose them (the importer decomposes the native LayerNormalization the
// same way): anchored at the square root of mean(u²) + eps, with u the input
// (RMS norm) or the input less its mean (layer norm), the division by it, and
// the affine scale and shift that follow, replaced by otc.layer_norm or
// otc.rms_norm (FusePatterns.h).
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "ir/ShapeUtils.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

/// Whether `v` is computed from `from`.
static bool dependsOn(Value v, Value from) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (x == from)
      return true;
    if (!seen.insert(x).second || isa<BlockArgument>(x))
      continue;
    llvm::append_range(work, x.getDefiningOp()->getOperands());
  }
  return false;
}

namespace {
/// A mean over the trailing dimensions: reduce_sum(input) times 1/n.
struct Mean {
  Value input;
  SmallVector<int64_t> axes;
  Operation *sum = nullptr;
};
} // namespace

/// Matches `v` = reduce_sum(x, axes, keep_dims) * (1/n) (or / n) with n the
/// reduced element count. Returns a near-miss reason in `why` when `v` is a
/// scaled keep-dims reduce_sum whose factor is not 1/n.
static std::optional<Mean> matchMean(Value v, std::string &why) {
  Value sum;
  double factor = 1.0;
  if (auto mul = v.getDefiningOp<MulOp>()) {
    for (auto [s, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())})
      if (std::optional<double> f = splatValue(c);
          f && s.getDefiningOp<ReduceSumOp>()) {
        sum = s;
        factor = *f;
      }
  } else if (auto div = v.getDefiningOp<DivOp>()) {
    if (std::optional<double> f = splatValue(div.getRhs())) {
      sum = div.getLhs();
      factor = 1.0 / *f;
    }
  }
  auto rs = sum ? sum.getDefiningOp<ReduceSumOp>() : ReduceSumOp();
  if (!rs || !rs.getKeepDims() || !sum.hasOneUse())
    return std::nullopt;
  int64_t n = 1;
  for (int64_t a : rs.getAxes())
    n *= shapeOf(rs.getInput())[a];
  if (!near(factor * static_cast<double>(n), 1.0)) {
    why = "the mean divides by " + std::to_string(1.0 / factor) + ", not the " +
          std::to_string(n) + " reduced elements";
    return std::nullopt;
  }
  return Mean{rs.getInput(), SmallVector<int64_t>(rs.getAxes()), rs};
}

/// Returns u when `v` = u^2 (pow by 2 or u * u).
static Value squareOf(Value v) {
  if (auto p = v.getDefiningOp<PowOp>()) {
    std::optional<double> e = splatValue(p.getRhs());
    return e && *e == 2.0 ? p.getLhs() : Value();
  }
  if (auto m = v.getDefiningOp<MulOp>())
    return m.getLhs() == m.getRhs() ? m.getLhs() : Value();
  return Value();
}

/// The value that divides `d` by `s`: div(d, s), d * reciprocal(s) or
/// d * (1 / s), where `s` has one use.
static Value normalizedBy(Value s, Value d) {
  if (!s.hasOneUse())
    return Value();
  Operation *u = *s.getUsers().begin();
  if (auto div = dyn_cast<DivOp>(u)) {
    if (div.getRhs() == s && div.getLhs() == d)
      return div;
    std::optional<double> one = splatValue(div.getLhs());
    if (div.getRhs() != s || !one || *one != 1.0)
      return Value();
    u = nullptr;
    s = div;
  } else if (auto rec = dyn_cast<ReciprocalOp>(u)) {
    s = rec;
  } else {
    return Value();
  }
  auto mul = singleUser<MulOp>(s);
  if (!mul || (mul.getLhs() != d && mul.getRhs() != d))
    return Value();
  return mul;
}

/// An affine parameter of the normalized shape `norm` read by `use`
/// (= `y` * p or `y` + p): p itself, or reshaped when it has the same
/// elements; null when it is computed from `x` or has another shape.
static Value affineOperand(PatternRewriter &rewriter, Value p, Value x,
                           ArrayRef<int64_t> norm) {
  if (dependsOn(p, x) || numElements(shapeOf(p)) != numElements(norm))
    return Value();
  if (shapeOf(p) == norm)
    return p;
  return rewriter.create<ReshapeOp>(p.getLoc(), withShape(p.getType(), norm),
                                    p);
}

namespace {
/// A normalization found under a square root: sqrt(mean(u²) + eps), with u
/// the input x (RMS norm) or x - mean(x) (layer norm, `centred`), over the
/// trailing dimensions from `axis`.
struct NormMatch {
  Value x, u, centred, var;
  std::optional<Mean> variance;
  double eps = 0.0;
  bool layer = false;
  int64_t axis = 0;
  const char *kind() const { return layer ? "layer norm" : "RMS norm"; }
};
} // namespace

/// The variance and epsilon under `sqrt`, mean(u²) + eps; a Match to
/// return when they are not there.
static std::optional<Match> matchVariance(SqrtOp sqrt, NormMatch &m) {
  auto add = sqrt.getInput().getDefiningOp<AddOp>();
  if (!add || !add->hasOneUse())
    return Match::no();
  if (std::optional<double> e = splatValue(add.getRhs())) {
    m.var = add.getLhs();
    m.eps = *e;
  } else if (std::optional<double> e2 = splatValue(add.getLhs())) {
    m.var = add.getRhs();
    m.eps = *e2;
  } else {
    return Match::no();
  }
  std::string why;
  m.variance = matchMean(m.var, why);
  m.u = m.variance ? squareOf(m.variance->input) : Value();
  if (!m.u) {
    if (!why.empty())
      return Match::miss("normalization: " + why);
    return Match::no();
  }
  if (!m.var.hasOneUse() || !m.variance->input.hasOneUse())
    return Match::miss("normalization: the variance is also read elsewhere");
  if (m.eps < 0.0)
    return Match::miss("normalization: epsilon is negative");
  return std::nullopt;
}

/// Layer norm when u = x - mean(x) over the variance's axes, else RMS norm
/// of u; the axes must be the trailing ones. A Match to return when not.
static std::optional<Match> matchCentring(NormMatch &m) {
  m.x = m.u;
  if (auto sub = m.u.getDefiningOp<SubOp>()) {
    std::string mwhy;
    std::optional<Mean> mm = matchMean(sub.getRhs(), mwhy);
    if (mm && mm->input == sub.getLhs()) {
      if (mm->axes != m.variance->axes)
        return Match::miss("layer norm: the mean and the variance reduce "
                           "over different axes");
      if (!sub.getRhs().hasOneUse())
        return Match::miss("layer norm: the mean is also read elsewhere");
      m.layer = true;
      m.centred = m.u;
      m.x = sub.getLhs();
    } else if (!mwhy.empty()) {
      return Match::miss("layer norm: " + mwhy);
    }
  }
  int64_t rank = shapeOf(m.x).size();
  m.axis = rank - static_cast<int64_t>(m.variance->axes.size());
  for (auto [i, a] : llvm::enumerate(m.variance->axes))
    if (a != m.axis + static_cast<int64_t>(i))
      return Match::miss(std::string(m.kind()) +
                         ": reduces over axes that are not the trailing "
                         "dimensions");
  return std::nullopt;
}

/// The scale (gamma) of y, the normalized input, and for layer norm the
/// shift (beta) after it, each over the normalized dimensions; returns the
/// op whose result the fused op replaces.
static Operation *matchScaleShift(PatternRewriter &rewriter, const NormMatch &m,
                                  Value y, Value &gamma, Value &beta) {
  ArrayRef<int64_t> norm = shapeOf(m.x).drop_front(m.axis);
  Operation *root = y.getDefiningOp();
  if (auto mul = singleUser<MulOp>(y); mul && shapeOf(mul) == shapeOf(m.x)) {
    rewriter.setInsertionPoint(mul);
    if ((gamma = affineOperand(rewriter, otherOperand(mul, y), m.x, norm)))
      root = mul;
  }
  if (m.layer && gamma) {
    Value g = root->getResult(0);
    if (auto plus = singleUser<AddOp>(g);
        plus && shapeOf(plus) == shapeOf(m.x)) {
      rewriter.setInsertionPoint(plus);
      if ((beta = affineOperand(rewriter, otherOperand(plus, g), m.x, norm)))
        root = plus;
    }
  }
  return root;
}

Match fuse::fuseNorm(SqrtOp sqrt, PatternRewriter &rewriter) {
  NormMatch m;
  if (std::optional<Match> no = matchVariance(sqrt, m))
    return *no;
  if (std::optional<Match> no = matchCentring(m))
    return *no;
  Value y = normalizedBy(sqrt, m.u);
  if (!y)
    return Match::miss(std::string(m.kind()) +
                       ": the input is not divided by the square root");
  if (m.layer) {
    // The centred input feeds the square and the division only.
    for (Operation *user : m.centred.getUsers())
      if (user != m.variance->input.getDefiningOp() &&
          user != y.getDefiningOp())
        return Match::miss("layer norm: the centred input is also read "
                           "elsewhere");
  }
  Value gamma, beta;
  Operation *root = matchScaleShift(rewriter, m, y, gamma, beta);
  rewriter.setInsertionPoint(root);
  Type stats = withShape(m.x.getType(), shapeOf(m.x).take_front(m.axis));
  Location loc = root->getLoc();
  Value result;
  if (m.layer)
    result = rewriter
                 .create<LayerNormOp>(
                     loc, TypeRange{m.x.getType(), stats, stats}, m.x, gamma,
                     beta, rewriter.getI64IntegerAttr(m.axis),
                     rewriter.getF64FloatAttr(m.eps))
                 .getResult();
  else
    result = rewriter
                 .create<RmsNormOp>(loc, TypeRange{m.x.getType(), stats}, m.x,
                                    gamma, rewriter.getI64IntegerAttr(m.axis),
                                    rewriter.getF64FloatAttr(m.eps))
                 .getResult();
  replaceChainOutput(rewriter, root->getResult(0), result);
  return Match::yes();
}
