//===- AppendLoss.h - a loss for graphs that end before one ----*- C++ -*-===//
//
// Many exported graphs end at the logits (or another prediction). otc-compile's
// `--loss` then names a loss to append to the imported `@forward`:
//
//   --loss=OUTPUT      the graph output OUTPUT is the loss
//   --loss=cross_entropy:LOGITS:TARGETS[:ignore=N]
//       mean softmax cross-entropy of LOGITS [d..., C] (classes on the last
//       axis) against a new int64 graph input TARGETS [d...]; targets equal
//       to N (default -100, PyTorch's default) are ignored: they contribute
//       nothing and the mean is over the others
//   --loss=mse:OUTPUT:TARGET
//       mean over all elements of (OUTPUT - TARGET)^2, TARGET a new float32
//       graph input of OUTPUT's shape
//
// An appended loss may be followed by terms `+C*OUTPUT` (or `+OUTPUT`, C =
// 1), each a scalar float32 graph output added C times: a mixture of
// experts' router loss the model returns beside its logits, e.g.
// `cross_entropy:logits:targets+0.02*aux_loss`.
//
// The new input becomes a graph input like any other (fed by `--batch` by
// name, and by `--data` as the targets), and the loss a new graph output
// named "loss".
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FRONTEND_APPENDLOSS_H
#define OTC_FRONTEND_APPENDLOSS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace otc {

/// A parsed `--loss` value.
struct LossSpec {
  enum class Kind { Output, CrossEntropy, Mse };
  Kind kind = Kind::Output;
  /// The graph output: the loss (Output), or what the appended loss reads.
  std::string output;
  /// The name of the appended graph input (CrossEntropy, Mse).
  std::string targets;
  /// CrossEntropy: targets equal to this are ignored.
  int64_t ignoreIndex = -100;
  /// Scalar graph outputs added to the appended loss, each times its
  /// coefficient (CrossEntropy, Mse).
  struct Term {
    double coefficient = 1.0;
    std::string output;
  };
  std::vector<Term> terms;
};

/// The name of the graph output an appended loss gets.
constexpr const char kAppendedLossName[] = "loss";

/// Parses a `--loss` value; on failure returns nullopt with `error` set.
std::optional<LossSpec> parseLossSpec(llvm::StringRef text, std::string &error);

/// Appends the loss of `spec` (CrossEntropy or Mse) to the module's
/// `@forward`: a new graph input `spec.targets` after the existing ones and a
/// new scalar output named kAppendedLossName. Returns false with a one-line
/// `error` naming the output or input at fault.
bool appendLoss(mlir::ModuleOp module, const LossSpec &spec,
                std::string &error);

} // namespace otc

#endif // OTC_FRONTEND_APPENDLOSS_H
