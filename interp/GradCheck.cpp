//===- GradCheck.cpp - finite-difference gradient checker -----------------===//
//
// Draws seeded random arguments for `@forward`, runs `@train_step` once in the
// interpreter for the analytic gradients, then perturbs each checked
// parameter element by +-h and runs `@forward` twice for the central
// difference (f(x + h) - f(x - h)) / 2h. Everything stays in float64, so with
// h = 1e-6 max(|x|, 1) the truncation error (~h^2) and the rounding error
// (~1e-16 / h) are both far below the default tolerance.
//
//===----------------------------------------------------------------------===//

#include "interp/GradCheck.h"
#include "interp/Interpreter.h"
#include "ir/Functions.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace mlir;
using namespace otc::interp;

/// The string value of attribute `name` on result `index` of `func`, or "".
static StringRef resultString(func::FuncOp func, unsigned index,
                              StringRef name) {
  if (auto attr = func.getResultAttrOfType<StringAttr>(index, name))
    return attr.getValue();
  return "";
}

/// True when `type` is a float tensor with exactly one element.
static bool isScalarFloat(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType()) &&
         tensor.hasStaticShape() && tensor.getNumElements() == 1;
}

/// Picks the loss among @forward's results: the only result; else the one
/// named like @train_step's loss (otc.output); else the one marked otc.loss;
/// else the only scalar float result. Emits an error when there is none.
static FailureOr<unsigned> findForwardLoss(func::FuncOp forward,
                                           func::FuncOp trainStep) {
  unsigned numResults = forward.getNumResults();
  std::optional<unsigned> found;
  if (numResults == 1)
    found = 0;
  StringRef lossName = resultString(trainStep, 0, otc::attrs::kOutput);
  for (unsigned i = 0; !found && !lossName.empty() && i < numResults; ++i)
    if (resultString(forward, i, otc::attrs::kOutput) == lossName)
      found = i;
  for (unsigned i = 0; !found && i < numResults; ++i)
    if (forward.getResultAttr(i, otc::attrs::kLoss))
      found = i;
  if (!found) {
    SmallVector<unsigned> scalars;
    for (unsigned i = 0; i < numResults; ++i)
      if (isScalarFloat(forward.getResultTypes()[i]))
        scalars.push_back(i);
    if (scalars.size() == 1)
      found = scalars.front();
  }
  if (!found || !isScalarFloat(forward.getResultTypes()[*found]))
    return forward.emitError("cannot tell which result of @forward is the "
                             "loss (want one scalar float result)");
  return *found;
}

/// Seeded random values for every argument of `func`: N(0, 1) for floats,
/// uniform integers in [0, otc.gradcheck.int_max) (default 2) otherwise.
static std::vector<Tensor> randomArguments(func::FuncOp func,
                                           std::mt19937_64 &rng) {
  std::vector<Tensor> args;
  std::normal_distribution<double> normal(0.0, 1.0);
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    Tensor t;
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.data.resize(type.getNumElements());
    if (isa<FloatType>(type.getElementType())) {
      for (double &x : t.data)
        x = normal(rng);
    } else {
      int64_t intMax = 2;
      if (auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         kGradCheckIntMax))
        intMax = std::max<int64_t>(attr.getInt(), 1);
      std::uniform_int_distribution<int64_t> uniform(0, intMax - 1);
      for (double &x : t.data)
        x = static_cast<double>(uniform(rng));
    }
    args.push_back(std::move(t));
  }
  return args;
}

/// The flat indices to check in a tensor of `count` elements: all of them, or
/// `limit` distinct random ones in increasing order.
static std::vector<int64_t> checkedIndices(int64_t count, int64_t limit,
                                           std::mt19937_64 &rng) {
  std::vector<int64_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  if (count <= limit)
    return all;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(limit);
  std::sort(all.begin(), all.end());
  return all;
}

/// Runs @forward on `args` and returns its loss value.
static FailureOr<double> evalLoss(func::FuncOp forward, unsigned lossIndex,
                                  ArrayRef<Tensor> args) {
  FailureOr<std::vector<Tensor>> results = runFunction(forward, args);
  if (failed(results))
    return failure();
  return (*results)[lossIndex].data[0];
}

LogicalResult otc::interp::checkGradients(ModuleOp module,
                                          const GradCheckOptions &options,
                                          llvm::raw_ostream &os) {
  func::FuncOp forward =
      requireFunction(module, "forward", ": the gradient check needs it");
  if (!forward)
    return failure();
  func::FuncOp trainStep = requireTrainStep(module);
  if (!trainStep)
    return failure();
  if (forward.getArgumentTypes() != trainStep.getArgumentTypes())
    return trainStep.emitError(
        "@train_step's arguments differ from @forward's");
  if (trainStep.getNumResults() == 0 ||
      !trainStep.getResultAttr(0, otc::attrs::kLoss) ||
      !isScalarFloat(trainStep.getResultTypes()[0]))
    return trainStep.emitError("result 0 of @train_step must be the scalar "
                               "loss (otc.loss)");
  FailureOr<unsigned> lossIndex = findForwardLoss(forward, trainStep);
  if (failed(lossIndex))
    return failure();

  std::mt19937_64 rng(options.seed);
  std::vector<Tensor> args = randomArguments(forward, rng);
  FailureOr<std::vector<Tensor>> analytic = runFunction(trainStep, args);
  if (failed(analytic))
    return failure();
  FailureOr<double> loss = evalLoss(forward, *lossIndex, args);
  if (failed(loss))
    return failure();

  os << "gradient check of @train_step against central differences of "
        "@forward (seed "
     << options.seed << ", tol " << llvm::format("%g", options.tol) << ")\n";
  bool allPassed = true;
  auto verdict = [](bool ok) -> const char * { return ok ? "PASS" : "FAIL"; };

  // The two functions must agree on the loss itself.
  double stepLoss = (*analytic)[0].data[0];
  double lossError =
      std::fabs(stepLoss - *loss) / std::max(std::fabs(*loss), 1e-12);
  bool lossOk = lossError <= options.tol;
  allPassed &= lossOk;
  os << llvm::format("  loss: @forward %.10g, @train_step %.10g  %s\n", *loss,
                     stepLoss, verdict(lossOk));

  os << llvm::format("  %-24s %9s %8s %12s  %s\n", (const char *)"parameter",
                     (const char *)"elements", (const char *)"checked",
                     (const char *)"rel. error", (const char *)"result");
  unsigned checkedParams = 0;
  for (unsigned r = 1; r < trainStep.getNumResults(); ++r) {
    StringRef name = resultString(trainStep, r, otc::attrs::kGrad);
    if (name.empty())
      continue;
    std::optional<unsigned> argIndex;
    for (unsigned a = 0; a < forward.getNumArguments(); ++a)
      if (auto param =
              forward.getArgAttrOfType<StringAttr>(a, otc::attrs::kParam))
        if (param.getValue() == name)
          argIndex = a;
    if (!argIndex)
      return trainStep.emitError("result ")
             << r << " is the gradient of '" << name
             << "', which is no otc.param argument of @forward";
    const Tensor &grad = (*analytic)[r];
    if (grad.shape != args[*argIndex].shape)
      return trainStep.emitError("the gradient of '")
             << name << "' does not have the parameter's shape";

    std::vector<int64_t> indices =
        checkedIndices(grad.data.size(), options.maxElements, rng);
    double diffNorm = 0.0, fdNorm = 0.0;
    for (int64_t i : indices) {
      std::vector<Tensor> perturbed = args;
      double x = args[*argIndex].data[i];
      double h = 1e-6 * std::max(std::fabs(x), 1.0);
      perturbed[*argIndex].data[i] = x + h;
      FailureOr<double> plus = evalLoss(forward, *lossIndex, perturbed);
      perturbed[*argIndex].data[i] = x - h;
      FailureOr<double> minus = evalLoss(forward, *lossIndex, perturbed);
      if (failed(plus) || failed(minus))
        return failure();
      double fd = (*plus - *minus) / (2.0 * h);
      diffNorm += (grad.data[i] - fd) * (grad.data[i] - fd);
      fdNorm += fd * fd;
    }
    double relError = std::sqrt(diffNorm) / std::max(std::sqrt(fdNorm), 1e-12);
    bool ok = relError <= options.tol; // Also false for NaN.
    allPassed &= ok;
    ++checkedParams;
    os << llvm::format("  %-24s %9lld %8lld %12.3e  %s\n", name.str().c_str(),
                       static_cast<long long>(grad.data.size()),
                       static_cast<long long>(indices.size()), relError,
                       verdict(ok));
  }
  if (checkedParams == 0) {
    allPassed = false;
    os << "  no otc.grad results to check\n";
  }
  os << "gradient check: " << (allPassed ? "PASS" : "FAIL") << "\n";
  return success(allPassed);
}
