// Unit tests of the host cross-entropy kernels of otcrt/kernels.h against a
// reference written here in double from the definition of otc.cross_entropy
// (ir/OtcFusedOps.td), whose analytic gradient is checked by central finite
// differences of the reduced loss weighted by dloss. Covers the mean, sum and
// none reductions, ignore_index, the NaN mean of an all-ignored batch, the
// error code of an out-of-range label, the in-place gradient (dlogits ==
// logits) and the bfloat16 entry points. The fused loss and gradient is
// checked against the same reference and against the forward then the
// backward (the same bits).
#include "kernels_test_util.h"
#include "otcrt/abi.h"

#include <limits>

namespace {

using Vec = std::vector<double>;

struct Case {
  int64_t rows, classes;
  int32_t hasIgnore;
  int64_t ignoreIndex;
  int32_t reduction;
};

/// Whether row r counts for the loss.
bool counts(const Case &tc, const std::vector<int64_t> &labels, int64_t r) {
  return !(tc.hasIgnore && labels[r] == tc.ignoreIndex);
}

/// The loss (one value, or one per row for none) and every row's lse.
void refForward(const Case &tc, const Vec &logits,
                const std::vector<int64_t> &labels, Vec &loss, Vec &lse) {
  lse.assign(tc.rows, 0);
  Vec perRow(tc.rows, 0);
  double sum = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < tc.rows; ++r) {
    double max = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t c = 0; c < tc.classes; ++c)
      max = std::max(max, logits[r * tc.classes + c]);
    for (int64_t c = 0; c < tc.classes; ++c)
      s += std::exp(logits[r * tc.classes + c] - max);
    lse[r] = max + std::log(s);
    if (!counts(tc, labels, r))
      continue;
    perRow[r] = lse[r] - logits[r * tc.classes + labels[r]];
    sum += perRow[r];
    ++n;
  }
  if (tc.reduction == OTCRT_NONE)
    loss = perRow;
  else if (tc.reduction == OTCRT_SUM)
    loss = {sum};
  else
    loss = {n ? sum / n : std::numeric_limits<double>::quiet_NaN()};
}

/// d(dloss . loss) / dlogits.
Vec refGradient(const Case &tc, const Vec &logits,
                const std::vector<int64_t> &labels, const Vec &dloss) {
  Vec loss, lse;
  refForward(tc, logits, labels, loss, lse);
  int64_t n = 0;
  for (int64_t r = 0; r < tc.rows; ++r)
    n += counts(tc, labels, r);
  Vec grad(logits.size(), 0);
  for (int64_t r = 0; r < tc.rows; ++r) {
    if (!counts(tc, labels, r))
      continue;
    double g = tc.reduction == OTCRT_NONE  ? dloss[r]
               : tc.reduction == OTCRT_SUM ? dloss[0]
                                           : dloss[0] / n;
    for (int64_t c = 0; c < tc.classes; ++c) {
      int64_t e = r * tc.classes + c;
      grad[e] = g * (std::exp(logits[e] - lse[r]) - (c == labels[r]));
    }
  }
  return grad;
}

std::vector<int64_t> randomLabels(const Case &tc, std::mt19937 &rng,
                                  int ignored) {
  std::uniform_int_distribution<int64_t> pick(0, tc.classes - 1);
  std::vector<int64_t> labels(tc.rows);
  for (int64_t &l : labels)
    l = pick(rng);
  for (int i = 0; i < ignored && i < tc.rows; ++i)
    labels[(i * 3) % tc.rows] = tc.ignoreIndex;
  return labels;
}

void run(const Case &tc, int ignored, std::mt19937 &rng) {
  std::vector<float> logits =
      kt::random(tc.rows * tc.classes, rng, -4, 4, true);
  std::vector<int64_t> labels = randomLabels(tc, rng, ignored);
  int64_t nLoss = tc.reduction == OTCRT_NONE ? tc.rows : 1;
  std::vector<float> dloss = kt::random(nLoss, rng, 0.5f, 2.0f, true);
  Vec ld = kt::toDouble(logits), dld = kt::toDouble(dloss);

  Vec refLoss, refLse;
  refForward(tc, ld, labels, refLoss, refLse);
  Vec refGrad = refGradient(tc, ld, labels, dld);
  auto weighted = [&](const Vec &x) {
    Vec loss, lse;
    refForward(tc, x, labels, loss, lse);
    return kt::dot(loss, dld);
  };
  kt::expectNear(refGrad, kt::numericGradient(weighted, ld), 1e-6, 1e-7,
                 "ref dlogits");

  std::vector<float> loss(nLoss), lse(tc.rows);
  ASSERT_EQ(otcrt_cross_entropy_fwd_f32(
                tc.rows, tc.classes, logits.data(), labels.data(), tc.hasIgnore,
                tc.ignoreIndex, tc.reduction, loss.data(), lse.data(), nullptr),
            0);
  kt::expectNear(loss, refLoss, 1e-5, 1e-5, "loss");
  kt::expectNear(lse, refLse, 1e-6, 1e-6, "lse");

  std::vector<float> dlogits(logits.size(), NAN);
  ASSERT_EQ(otcrt_cross_entropy_bwd_f32(
                tc.rows, tc.classes, dloss.data(), logits.data(), labels.data(),
                lse.data(), tc.hasIgnore, tc.ignoreIndex, tc.reduction,
                dlogits.data(), nullptr),
            0);
  kt::expectNear(dlogits, refGrad, 1e-5, 1e-6, "dlogits");

  // In place: the same values in the logits' own buffer.
  std::vector<float> inPlace = logits;
  ASSERT_EQ(otcrt_cross_entropy_bwd_f32(
                tc.rows, tc.classes, dloss.data(), inPlace.data(),
                labels.data(), lse.data(), tc.hasIgnore, tc.ignoreIndex,
                tc.reduction, inPlace.data(), nullptr),
            0);
  EXPECT_EQ(inPlace, dlogits);

  // bfloat16 logits: loss and lse as the f32 kernel's (the same floats),
  // dlogits within bfloat16 rounding; in place too.
  std::vector<otcrt_bf16> lb = kt::toBf16(logits);
  std::vector<float> lossb(nLoss), lseb(tc.rows);
  ASSERT_EQ(otcrt_cross_entropy_fwd_bf16(tc.rows, tc.classes, lb.data(),
                                         labels.data(), tc.hasIgnore,
                                         tc.ignoreIndex, tc.reduction,
                                         lossb.data(), lseb.data(), nullptr),
            0);
  EXPECT_EQ(lossb, loss);
  EXPECT_EQ(lseb, lse);
  std::vector<otcrt_bf16> dlb(logits.size());
  ASSERT_EQ(otcrt_cross_entropy_bwd_bf16(tc.rows, tc.classes, dloss.data(),
                                         lb.data(), labels.data(), lse.data(),
                                         tc.hasIgnore, tc.ignoreIndex,
                                         tc.reduction, dlb.data(), nullptr),
            0);
  kt::expectBf16Of(dlb, dlogits, "dlogits bf16");
  ASSERT_EQ(otcrt_cross_entropy_bwd_bf16(tc.rows, tc.classes, dloss.data(),
                                         lb.data(), labels.data(), lse.data(),
                                         tc.hasIgnore, tc.ignoreIndex,
                                         tc.reduction, lb.data(), nullptr),
            0);
  EXPECT_EQ(lb, dlb);
}

/// The fused loss and gradient, f32 and bf16, out of place and in place,
/// against the double reference (loss, row_loss, dlogits) and against the
/// forward then the backward on the same logits: the same bits (the cpu
/// target's fused call is those two). row_loss and dlogits start as NaN:
/// every element is written.
void runFused(const Case &tc, int ignored, std::mt19937 &rng) {
  std::vector<float> logits =
      kt::random(tc.rows * tc.classes, rng, -4, 4, true);
  std::vector<int64_t> labels = randomLabels(tc, rng, ignored);
  int64_t nLoss = tc.reduction == OTCRT_NONE ? tc.rows : 1;
  std::vector<float> dloss = kt::random(nLoss, rng, 0.5f, 2.0f, true);
  Vec ld = kt::toDouble(logits), dld = kt::toDouble(dloss);
  Vec refLoss, refRowLoss, refLse;
  refForward(tc, ld, labels, refLoss, refLse);
  Case perRow = tc;
  perRow.reduction = OTCRT_NONE;
  refForward(perRow, ld, labels, refRowLoss, refLse);
  Vec refGrad = refGradient(tc, ld, labels, dld);

  std::vector<float> loss(nLoss, NAN), rowLoss(tc.rows, NAN),
      dlogits(logits.size(), NAN);
  ASSERT_EQ(otcrt_cross_entropy_fused_f32(
                tc.rows, tc.classes, dloss.data(), logits.data(), labels.data(),
                tc.hasIgnore, tc.ignoreIndex, tc.reduction, loss.data(),
                rowLoss.data(), dlogits.data(), nullptr),
            0);
  kt::expectNear(loss, refLoss, 1e-5, 1e-5, "fused loss");
  kt::expectNear(rowLoss, refRowLoss, 1e-5, 1e-5, "fused row_loss");
  kt::expectNear(dlogits, refGrad, 1e-5, 1e-6, "fused dlogits");

  std::vector<float> fwdLoss(nLoss), lse(tc.rows), bwd(logits.size());
  ASSERT_EQ(otcrt_cross_entropy_fwd_f32(tc.rows, tc.classes, logits.data(),
                                        labels.data(), tc.hasIgnore,
                                        tc.ignoreIndex, tc.reduction,
                                        fwdLoss.data(), lse.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_cross_entropy_bwd_f32(
                tc.rows, tc.classes, dloss.data(), logits.data(), labels.data(),
                lse.data(), tc.hasIgnore, tc.ignoreIndex, tc.reduction,
                bwd.data(), nullptr),
            0);
  EXPECT_EQ(dlogits, bwd);
  EXPECT_EQ(loss, fwdLoss);
  if (tc.reduction == OTCRT_NONE)
    EXPECT_EQ(rowLoss, loss);

  std::vector<float> inPlace = logits, loss2(nLoss), rowLoss2(tc.rows, NAN);
  ASSERT_EQ(otcrt_cross_entropy_fused_f32(
                tc.rows, tc.classes, dloss.data(), inPlace.data(),
                labels.data(), tc.hasIgnore, tc.ignoreIndex, tc.reduction,
                loss2.data(), rowLoss2.data(), inPlace.data(), nullptr),
            0);
  EXPECT_EQ(inPlace, dlogits);
  EXPECT_EQ(loss2, loss);
  EXPECT_EQ(rowLoss2, rowLoss);

  // bfloat16 logits of the same values: the same losses, the gradient the
  // bf16 backward's bits, within bfloat16 rounding of the f32 one.
  std::vector<otcrt_bf16> lb = kt::toBf16(logits), dlb(logits.size(), 0xffff),
                          bwdb(logits.size());
  std::vector<float> lossb(nLoss), rowLossb(tc.rows, NAN), lseb(tc.rows);
  ASSERT_EQ(otcrt_cross_entropy_fused_bf16(
                tc.rows, tc.classes, dloss.data(), lb.data(), labels.data(),
                tc.hasIgnore, tc.ignoreIndex, tc.reduction, lossb.data(),
                rowLossb.data(), dlb.data(), nullptr),
            0);
  EXPECT_EQ(lossb, loss);
  EXPECT_EQ(rowLossb, rowLoss);
  kt::expectBf16Of(dlb, dlogits, "fused dlogits bf16");
  ASSERT_EQ(otcrt_cross_entropy_fwd_bf16(tc.rows, tc.classes, lb.data(),
                                         labels.data(), tc.hasIgnore,
                                         tc.ignoreIndex, tc.reduction,
                                         fwdLoss.data(), lseb.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_cross_entropy_bwd_bf16(tc.rows, tc.classes, dloss.data(),
                                         lb.data(), labels.data(), lseb.data(),
                                         tc.hasIgnore, tc.ignoreIndex,
                                         tc.reduction, bwdb.data(), nullptr),
            0);
  EXPECT_EQ(dlb, bwdb);
  std::fill(rowLossb.begin(), rowLossb.end(), NAN);
  ASSERT_EQ(otcrt_cross_entropy_fused_bf16(
                tc.rows, tc.classes, dloss.data(), lb.data(), labels.data(),
                tc.hasIgnore, tc.ignoreIndex, tc.reduction, lossb.data(),
                rowLossb.data(), lb.data(), nullptr),
            0);
  EXPECT_EQ(lb, dlb);
  EXPECT_EQ(lossb, loss);
  EXPECT_EQ(rowLossb, rowLoss);
}

} // namespace

TEST(KernelsCrossEntropy, Mean) {
  std::mt19937 rng(201);
  run({9, 7, 0, 0, OTCRT_MEAN}, 0, rng);
}

TEST(KernelsCrossEntropy, Sum) {
  std::mt19937 rng(202);
  run({6, 11, 0, 0, OTCRT_SUM}, 0, rng);
}

TEST(KernelsCrossEntropy, None) {
  std::mt19937 rng(203);
  run({5, 4, 0, 0, OTCRT_NONE}, 0, rng);
}

TEST(KernelsCrossEntropy, IgnoreIndexEveryReduction) {
  std::mt19937 rng(204);
  run({10, 6, 1, -100, OTCRT_MEAN}, 3, rng);
  run({10, 6, 1, -100, OTCRT_SUM}, 3, rng);
  run({10, 6, 1, -100, OTCRT_NONE}, 3, rng);
  // An ignore_index inside [0, classes): those rows are ignored too.
  run({8, 5, 1, 2, OTCRT_MEAN}, 2, rng);
}

TEST(KernelsCrossEntropy, AllIgnoredMeanIsNaN) {
  const int64_t rows = 3, classes = 4;
  std::vector<float> logits(rows * classes, 0.5f), lse(rows);
  std::vector<int64_t> labels(rows, -1);
  float loss = 0;
  ASSERT_EQ(otcrt_cross_entropy_fwd_f32(rows, classes, logits.data(),
                                        labels.data(), 1, -1, OTCRT_MEAN, &loss,
                                        lse.data(), nullptr),
            0);
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_NEAR(lse[0], std::log(4.0) + 0.5, 1e-6); // ignored rows get lse too
  float sum = 1;
  ASSERT_EQ(otcrt_cross_entropy_fwd_f32(rows, classes, logits.data(),
                                        labels.data(), 1, -1, OTCRT_SUM, &sum,
                                        lse.data(), nullptr),
            0);
  EXPECT_EQ(sum, 0.0f);
  float dloss = 1;
  std::vector<float> dlogits(logits.size(), NAN);
  ASSERT_EQ(otcrt_cross_entropy_bwd_f32(rows, classes, &dloss, logits.data(),
                                        labels.data(), lse.data(), 1, -1,
                                        OTCRT_MEAN, dlogits.data(), nullptr),
            0);
  for (float g : dlogits)
    EXPECT_EQ(g, 0.0f);
}

TEST(KernelsCrossEntropy, OutOfRangeLabelFails) {
  const int64_t rows = 2, classes = 3;
  std::vector<float> logits(rows * classes, 0.0f), lse(rows), d(rows * classes);
  std::vector<otcrt_bf16> lb(rows * classes, 0), db(rows * classes);
  float loss[2], dloss[2] = {1, 1};
  for (int64_t bad : {int64_t(3), int64_t(-1), int64_t(-100)}) {
    std::vector<int64_t> labels = {0, bad};
    EXPECT_NE(otcrt_cross_entropy_fwd_f32(rows, classes, logits.data(),
                                          labels.data(), 0, 0, OTCRT_MEAN, loss,
                                          lse.data(), nullptr),
              0);
    EXPECT_NE(otcrt_cross_entropy_fwd_bf16(rows, classes, lb.data(),
                                           labels.data(), 0, 0, OTCRT_NONE,
                                           loss, lse.data(), nullptr),
              0);
    EXPECT_NE(otcrt_cross_entropy_bwd_f32(rows, classes, dloss, logits.data(),
                                          labels.data(), lse.data(), 0, 0,
                                          OTCRT_SUM, d.data(), nullptr),
              0);
    EXPECT_NE(otcrt_cross_entropy_bwd_bf16(rows, classes, dloss, lb.data(),
                                           labels.data(), lse.data(), 0, 0,
                                           OTCRT_MEAN, db.data(), nullptr),
              0);
    // The first failure is in the error record (row 1, the label, the
    // classes), which the read clears.
    OtcrtKernelError e{};
    EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_LABEL);
    EXPECT_EQ(e.index, 1);
    EXPECT_EQ(e.value, bad);
    EXPECT_EQ(e.bound, classes);
    EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_NONE);
    // The same label is fine once it is the ignored one.
    EXPECT_EQ(otcrt_cross_entropy_fwd_f32(rows, classes, logits.data(),
                                          labels.data(), 1, bad, OTCRT_MEAN,
                                          loss, lse.data(), nullptr),
              0);
  }
}

TEST(KernelsCrossEntropy, FusedEveryReduction) {
  std::mt19937 rng(205);
  runFused({9, 7, 0, 0, OTCRT_MEAN}, 0, rng);
  runFused({6, 11, 0, 0, OTCRT_SUM}, 0, rng);
  runFused({5, 4, 0, 0, OTCRT_NONE}, 0, rng);
  runFused({10, 6, 1, -100, OTCRT_MEAN}, 3, rng);
  runFused({10, 6, 1, -100, OTCRT_SUM}, 3, rng);
  runFused({10, 6, 1, -100, OTCRT_NONE}, 3, rng);
  // An ignore_index inside [0, classes); more rows than threads would take.
  runFused({8, 5, 1, 2, OTCRT_MEAN}, 2, rng);
  runFused({67, 33, 1, -1, OTCRT_MEAN}, 9, rng);
}

TEST(KernelsCrossEntropy, FusedAllIgnored) {
  const int64_t rows = 3, classes = 4;
  std::vector<float> logits(rows * classes, 0.5f), rowLoss(rows, NAN),
      dlogits(rows * classes, NAN);
  std::vector<int64_t> labels(rows, -1);
  float loss = 0, dloss = 1;
  ASSERT_EQ(otcrt_cross_entropy_fused_f32(
                rows, classes, &dloss, logits.data(), labels.data(), 1, -1,
                OTCRT_MEAN, &loss, rowLoss.data(), dlogits.data(), nullptr),
            0);
  EXPECT_TRUE(std::isnan(loss));
  for (float l : rowLoss)
    EXPECT_EQ(l, 0.0f);
  for (float g : dlogits)
    EXPECT_EQ(g, 0.0f);
  ASSERT_EQ(otcrt_cross_entropy_fused_f32(
                rows, classes, &dloss, logits.data(), labels.data(), 1, -1,
                OTCRT_SUM, &loss, rowLoss.data(), dlogits.data(), nullptr),
            0);
  EXPECT_EQ(loss, 0.0f);
}

TEST(KernelsCrossEntropy, FusedBadArguments) {
  const int64_t rows = 2, classes = 3;
  std::vector<float> logits(rows * classes, 0.25f), rowLoss(rows),
      d(rows * classes);
  std::vector<otcrt_bf16> lb(rows * classes, 0x3e80), db(rows * classes);
  std::vector<int64_t> labels = {0, 1};
  float loss[2], dloss[2] = {1, 1};
  EXPECT_EQ(otcrt_cross_entropy_fused_f32(rows, classes, dloss, logits.data(),
                                          labels.data(), 0, 0, 3, loss,
                                          rowLoss.data(), d.data(), nullptr),
            1);
  EXPECT_EQ(otcrt_cross_entropy_fused_bf16(
                rows, 0, dloss, lb.data(), labels.data(), 0, 0, OTCRT_MEAN,
                loss, rowLoss.data(), db.data(), nullptr),
            1);
  // A bad label fails the call before anything is written: in place, the
  // logits are intact.
  for (int64_t bad : {int64_t(3), int64_t(-1), int64_t(-100)}) {
    labels = {0, bad};
    EXPECT_EQ(otcrt_cross_entropy_fused_f32(
                  rows, classes, dloss, logits.data(), labels.data(), 0, 0,
                  OTCRT_MEAN, loss, rowLoss.data(), logits.data(), nullptr),
              OTCRT_ERROR_LABEL);
    EXPECT_EQ(otcrt_cross_entropy_fused_bf16(
                  rows, classes, dloss, lb.data(), labels.data(), 0, 0,
                  OTCRT_NONE, loss, rowLoss.data(), lb.data(), nullptr),
              OTCRT_ERROR_LABEL);
    for (float x : logits)
      EXPECT_EQ(x, 0.25f);
    for (otcrt_bf16 x : lb)
      EXPECT_EQ(x, 0x3e80);
    EXPECT_EQ(otcrt_kernel_error(nullptr, nullptr), OTCRT_ERROR_LABEL);
    // The same label is fine once it is the ignored one.
    EXPECT_EQ(otcrt_cross_entropy_fused_f32(
                  rows, classes, dloss, logits.data(), labels.data(), 1, bad,
                  OTCRT_MEAN, loss, rowLoss.data(), d.data(), nullptr),
              0);
  }
}

namespace {

/// otcrt_linear_cross_entropy_f32 in chunks of `chunk` rows against the
/// double-precision head (logits = h wᵀ, plus a random bias with
/// `withBias`), the reference loss and gradient (refForward, refGradient),
/// dh = dlogits w, dw = dlogitsᵀ h and the bias's gradient, the sum of
/// dlogits' rows; and the loss the same bits whatever the chunk (every
/// row's loss summed in row order). With `accumulate`, dw starts as random
/// values the call adds to. With `byHidden` the call is given w (and
/// returns dw) stored [hidden, classes] (OTCRT_W_HIDDEN_CLASSES).
void runLinear(const Case &tc, int64_t hidden, int64_t chunk, int ignored,
               std::mt19937 &rng, bool accumulate = false,
               bool withBias = false, bool byHidden = false) {
  SCOPED_TRACE("rows " + std::to_string(tc.rows) + " classes " +
               std::to_string(tc.classes) + " chunk " + std::to_string(chunk) +
               (accumulate ? " accumulating" : "") +
               (withBias ? " with a bias" : "") +
               (byHidden ? " w [hidden, classes]" : ""));
  std::vector<float> h = kt::random(tc.rows * hidden, rng),
                     w = kt::random(tc.classes * hidden, rng);
  std::vector<float> bias =
      withBias ? kt::random(tc.classes, rng) : std::vector<float>();
  std::vector<int64_t> labels = randomLabels(tc, rng, ignored);
  const size_t nLoss = tc.reduction == OTCRT_NONE ? tc.rows : 1;
  std::vector<float> dloss = kt::random(nLoss, rng, 0.5f, 2.0f);
  Vec logits(tc.rows * tc.classes, 0);
  for (int64_t r = 0; r < tc.rows; ++r)
    for (int64_t v = 0; v < tc.classes; ++v)
      for (int64_t c = 0; c < hidden; ++c)
        logits[r * tc.classes + v] += double(h[r * hidden + c]) * w[v * hidden + c];
  if (withBias)
    for (int64_t r = 0; r < tc.rows; ++r)
      for (int64_t v = 0; v < tc.classes; ++v)
        logits[r * tc.classes + v] += bias[v];
  Vec loss, lse;
  refForward(tc, logits, labels, loss, lse);
  Vec dz = refGradient(tc, logits, labels, kt::toDouble(dloss));
  Vec dh(tc.rows * hidden, 0), dw(tc.classes * hidden, 0), dbias(tc.classes, 0);
  for (int64_t r = 0; r < tc.rows; ++r)
    for (int64_t v = 0; v < tc.classes; ++v) {
      dbias[v] += dz[r * tc.classes + v];
      for (int64_t c = 0; c < hidden; ++c) {
        dh[r * hidden + c] += dz[r * tc.classes + v] * w[v * hidden + c];
        dw[v * hidden + c] += dz[r * tc.classes + v] * h[r * hidden + c];
      }
    }

  // w and dw as the call stores them: [classes, hidden], or transposed.
  const int32_t layout =
      byHidden ? OTCRT_W_HIDDEN_CLASSES : OTCRT_W_CLASSES_HIDDEN;
  auto stored = [&](const auto &vc) {
    auto out = vc;
    if (byHidden)
      for (int64_t v = 0; v < tc.classes; ++v)
        for (int64_t c = 0; c < hidden; ++c)
          out[c * tc.classes + v] = vc[v * hidden + c];
    return out;
  };
  const std::vector<float> wArg = stored(w);
  dw = stored(dw);
  std::vector<float> gotLoss(nLoss), rowLoss(tc.rows), gotDh(dh.size(), NAN),
      gotDw(dw.size(), NAN), gotDbias(tc.classes, NAN),
      scratch(chunk * tc.classes);
  const float *biasArg = withBias ? bias.data() : nullptr;
  float *dbiasArg = withBias ? gotDbias.data() : nullptr;
  if (accumulate) {
    gotDw = kt::random(dw.size(), rng);
    for (size_t i = 0; i < dw.size(); ++i)
      dw[i] += gotDw[i];
  }
  ASSERT_EQ(otcrt_linear_cross_entropy_f32(
                tc.rows, hidden, tc.classes, chunk, dloss.data(), h.data(),
                wArg.data(), layout, labels.data(), tc.hasIgnore,
                tc.ignoreIndex, tc.reduction, OTC_F32, accumulate, biasArg,
                gotLoss.data(), rowLoss.data(), gotDh.data(), gotDw.data(),
                dbiasArg, scratch.data(), nullptr),
            0);
  kt::expectNear(gotLoss, loss, 1e-5, 1e-6, "loss");
  kt::expectNear(gotDh, dh, 1e-4, 1e-5, "dh");
  kt::expectNear(gotDw, dw, 1e-4, 1e-5, "dw");
  if (withBias)
    kt::expectNear(gotDbias, dbias, 1e-4, 1e-5, "dbias");

  std::vector<float> wholeLoss(nLoss), wholeRows(tc.rows),
      wholeDh(dh.size()), wholeDw(dw.size()), whole(tc.rows * tc.classes);
  ASSERT_EQ(otcrt_linear_cross_entropy_f32(
                tc.rows, hidden, tc.classes, tc.rows, dloss.data(), h.data(),
                wArg.data(), layout, labels.data(), tc.hasIgnore,
                tc.ignoreIndex, tc.reduction, OTC_F32, 0, biasArg,
                wholeLoss.data(), wholeRows.data(), wholeDh.data(),
                wholeDw.data(), nullptr, whole.data(), nullptr),
            0);
  for (size_t i = 0; i < nLoss; ++i)
    EXPECT_EQ(gotLoss[i], wholeLoss[i]) << "loss [" << i << "]";
}

} // namespace

TEST(KernelsCrossEntropy, LinearChunks) {
  std::mt19937 rng(311);
  // Chunks that divide the rows, that do not (the last one short), of one
  // row, and all the rows; every reduction, with ignored rows.
  runLinear({12, 7, 0, 0, OTCRT_MEAN}, 5, 4, 0, rng);
  runLinear({13, 7, 1, -100, OTCRT_MEAN}, 5, 5, 4, rng);
  runLinear({13, 9, 1, -100, OTCRT_SUM}, 3, 1, 2, rng);
  runLinear({10, 6, 1, -1, OTCRT_NONE}, 4, 3, 3, rng);
  runLinear({9, 11, 0, 0, OTCRT_MEAN}, 6, 9, 0, rng);
}

// dw_accumulate adds the whole gradient to dw's values, from the first
// chunk on (a tied weight's accumulator): chunked, one chunk, all ignored.
TEST(KernelsCrossEntropy, LinearAccumulates) {
  std::mt19937 rng(313);
  runLinear({12, 7, 0, 0, OTCRT_MEAN}, 5, 4, 0, rng, true);
  runLinear({13, 7, 1, -100, OTCRT_SUM}, 5, 13, 4, rng, true);
  runLinear({5, 3, 1, -1, OTCRT_SUM}, 2, 2, 5, rng, true);
}

// A bias on the logits (BERT's decoder, BART's final_logits_bias) and its
// gradient summed over every chunk's rows: chunks that divide the rows, a
// short last one, one row a chunk, every reduction, with dw accumulating.
// (No chunk of one row among more: with OpenBLAS a one-row product is its
// sgemv, whose sums may round apart from sgemm's, so that the loss of that
// row would not be the unchunked call's bits.)
TEST(KernelsCrossEntropy, LinearBias) {
  std::mt19937 rng(317);
  runLinear({12, 7, 0, 0, OTCRT_MEAN}, 5, 4, 0, rng, false, true);
  runLinear({13, 7, 1, -100, OTCRT_MEAN}, 5, 5, 4, rng, false, true);
  runLinear({13, 9, 1, -100, OTCRT_SUM}, 3, 1, 2, rng, true, true);
  runLinear({10, 6, 1, -1, OTCRT_NONE}, 4, 4, 3, rng, false, true);
  runLinear({9, 11, 0, 0, OTCRT_MEAN}, 6, 9, 0, rng, false, true);
}

// The head's weight stored [hidden, classes] (an export's transposed copy):
// logits = h w, dw in that layout; with a bias, accumulating, every
// reduction.
TEST(KernelsCrossEntropy, LinearByHidden) {
  std::mt19937 rng(319);
  runLinear({12, 7, 0, 0, OTCRT_MEAN}, 5, 4, 0, rng, false, false, true);
  runLinear({13, 7, 1, -100, OTCRT_MEAN}, 5, 5, 4, rng, true, true, true);
  runLinear({13, 9, 1, -100, OTCRT_SUM}, 3, 1, 2, rng, false, true, true);
  runLinear({10, 6, 1, -1, OTCRT_NONE}, 4, 4, 3, rng, true, false, true);
}

// A bias's gradient without a bias is refused.
TEST(KernelsCrossEntropy, LinearDbiasWithoutBias) {
  const int64_t rows = 2, hidden = 2, classes = 3;
  std::vector<float> h(rows * hidden, 1.0f), w(classes * hidden, 1.0f),
      rowLoss(rows), dh(rows * hidden), dw(classes * hidden), dbias(classes),
      scratch(rows * classes);
  std::vector<int64_t> labels = {0, 1};
  float loss = 0, dloss = 1;
  EXPECT_NE(otcrt_linear_cross_entropy_f32(
                rows, hidden, classes, 2, &dloss, h.data(), w.data(),
                OTCRT_W_CLASSES_HIDDEN, labels.data(), 0, 0, OTCRT_MEAN,
                OTC_F32, 0, nullptr, &loss, rowLoss.data(), dh.data(),
                dw.data(), dbias.data(), scratch.data(), nullptr),
            0);
}

// One class: every row's loss is 0 and so is every gradient (PyTorch's
// log_softmax of a single logit is 0).
TEST(KernelsCrossEntropy, LinearOneClass) {
  std::mt19937 rng(312);
  runLinear({6, 1, 0, 0, OTCRT_MEAN}, 4, 4, 0, rng);
}

// Every row ignored: a mean is NaN (0 / 0) and the gradients are zero.
TEST(KernelsCrossEntropy, LinearAllIgnored) {
  const int64_t rows = 5, hidden = 3, classes = 4;
  std::vector<float> h(rows * hidden, 0.5f), w(classes * hidden, 0.25f),
      rowLoss(rows, NAN), dh(rows * hidden, NAN), dw(classes * hidden, NAN),
      scratch(2 * classes);
  std::vector<int64_t> labels(rows, -1);
  float loss = 0, dloss = 1;
  ASSERT_EQ(otcrt_linear_cross_entropy_f32(
                rows, hidden, classes, 2, &dloss, h.data(), w.data(),
                OTCRT_W_CLASSES_HIDDEN, labels.data(), 1, -1, OTCRT_MEAN,
                OTC_F32, 0, nullptr, &loss, rowLoss.data(), dh.data(),
                dw.data(), nullptr, scratch.data(), nullptr),
            0);
  EXPECT_TRUE(std::isnan(loss));
  for (float v : dh)
    EXPECT_EQ(v, 0.0f);
  for (float v : dw)
    EXPECT_EQ(v, 0.0f);
}

// A label outside the classes fails the call before anything is written.
TEST(KernelsCrossEntropy, LinearBadLabel) {
  const int64_t rows = 4, hidden = 2, classes = 3;
  std::vector<float> h(rows * hidden, 1.0f), w(classes * hidden, 1.0f),
      rowLoss(rows, NAN), dh(rows * hidden, NAN), dw(classes * hidden, NAN),
      scratch(rows * classes);
  std::vector<int64_t> labels = {0, 1, 3, 2};
  float loss = NAN, dloss = 1;
  EXPECT_NE(otcrt_linear_cross_entropy_f32(
                rows, hidden, classes, 2, &dloss, h.data(), w.data(),
                OTCRT_W_CLASSES_HIDDEN, labels.data(), 0, 0, OTCRT_MEAN,
                OTC_F32, 0, nullptr, &loss, rowLoss.data(), dh.data(),
                dw.data(), nullptr, scratch.data(), nullptr),
            0);
  EXPECT_TRUE(std::isnan(dh[0]));
  OtcrtKernelError e{};
  EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_LABEL);
  EXPECT_EQ(e.index, 2);
  EXPECT_EQ(e.value, 3);
}
