//===- GradCheck.h - finite-difference gradient checker ---------*- C++ -*-===//
//
// Checks the gradients that the differentiation pass produces: the analytic
// gradients of `@train_step` are evaluated with the reference interpreter and
// compared with central finite differences of `@forward`, both in float64 on
// the same seeded random inputs and parameters.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_INTERP_GRADCHECK_H
#define OTC_INTERP_GRADCHECK_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace otc::interp {

/// Name of the optional integer attribute on an integer `@forward` argument
/// that bounds its random values: they are drawn uniformly from [0, N)
/// (default N = 2).
constexpr const char kGradCheckIntMax[] = "otc.gradcheck.int_max";

/// Settings of checkGradients.
struct GradCheckOptions {
  /// Largest accepted relative error per parameter.
  double tol = 1e-6;
  /// Seed of the random inputs, parameters and checked elements.
  uint64_t seed = 0;
  /// Parameters with more elements are checked on this many random ones.
  int64_t maxElements = 64;
};

/// For a module with a forward function `@forward` (loss = the result with
/// otc.output, or the only scalar float result) and its differentiated twin
/// `@train_step` (results: the loss (attr otc.loss) then one gradient per
/// trainable parameter, each result carrying otc.grad = "<param name>";
/// arguments identical to @forward's), evaluates analytic gradients with the
/// interpreter and compares with central finite differences (float64, step
/// h = 1e-6 relative) of @forward. Prints a table and returns failure when any
/// relative error > tol.
///
/// Inputs and parameters (float arguments) are drawn from N(0, 1) with
/// std::mt19937_64 seeded by `options.seed`; integer arguments uniformly from
/// [0, N) (see kGradCheckIntMax); the otc.rng_key argument is drawn once and
/// held fixed, so dropout masks are the same in every evaluation. The error of
/// a parameter is ||analytic - fd|| / max(||fd||, 1e-12) over its checked
/// elements. Malformed modules get an error at the offending location.
mlir::LogicalResult checkGradients(mlir::ModuleOp module,
                                   const GradCheckOptions &options,
                                   llvm::raw_ostream &os);

} // namespace otc::interp

#endif // OTC_INTERP_GRADCHECK_H
