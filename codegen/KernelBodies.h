//===- KernelBodies.h - per-op bodies of generated kernels -------*- C++
//-*-===//
//
// A generated kernel runs a body once per work item `i` in [0, workItems):
// a loop on the cpu target, a grid-stride loop on cuda. This header declares
// the entry points that count an op's work items and emit its body; the same
// body text serves both targets. The emitters live by op family in
// ElementwiseBodies.cpp (with ScalarExprPrinter.cpp), DataMovementBodies.cpp,
// ReductionBodies.cpp and LossBodies.cpp (helpers in BodyUtils.h).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_KERNELBODIES_H
#define OTC_CODEGEN_KERNELBODIES_H

#include "mlir/IR/Operation.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace otc {
class Target;

/// What a body emitter writes to and the C names it reads.
struct BodyContext {
  /// The body's statements.
  llvm::raw_ostream &os;
  /// File-scope declarations (constant tables) the body refers to.
  llvm::raw_ostream &globals;
  /// Pointer names of the op's operands and results.
  llvm::ArrayRef<std::string> in, out;
  /// Unique prefix for globals of this kernel.
  std::string prefix;
  /// The program's target (codegen/Target.h).
  const Target &target;
  /// Where given: statements the same for every work item (scalar loads
  /// and what follows from them alone), emitted once per thread before the
  /// item loop, which the body's statements may then use.
  llvm::raw_ostream *uniform = nullptr;
};

/// The C type of an element type.
std::string cTypeOf(mlir::Type elementType);

/// The number of independent work items of `op`'s body.
int64_t workItems(mlir::Operation *op);

/// The dependent steps one work item of `op`'s body takes, what the
/// step-time model prices a thread's serial work by (KernelLaunch,
/// perf/GridLaunch.h): waits for loads from memory (`memory`), and for loads
/// every work item makes alike (an index array all of them scan), served by
/// the SM's L1 (`cached`). A loop that stores waits once per iteration (its
/// next loads may read what it stored); a loop that only loads and
/// accumulates (a reduction, a softmax's maximum and sum) waits once per
/// kUnrolledLoads iterations; stores alone do not wait. An elementwise item
/// is one memory step.
struct ItemSteps {
  int64_t memory = 1, cached = 0;
};
ItemSteps workItemSteps(mlir::Operation *op);

/// The iterations of a store-free loop whose loads a thread issues before
/// it waits: nvcc 13 at -O3 unrolls the emitted reduction and softmax loops
/// for sm_90 by 4 to 32 (their PTX); the least of those.
constexpr int64_t kUnrolledLoads = 4;

/// The waits of a store-free loop of `n` iterations.
inline int64_t unrolledSteps(int64_t n) {
  return (n + kUnrolledLoads - 1) / kUnrolledLoads;
}

/// Emits the body of `op` for work item `i`; fails with an op error when the
/// op has no emitter.
mlir::LogicalResult emitBody(mlir::Operation *op, BodyContext &ctx);

/// On a target that packs elementwise kernels: the elements of one 16-byte
/// packet when every packet of slice or concat `op`'s result copies W
/// contiguous elements of one input (the sliced or joined axis and offsets
/// multiples of W), else 1.
int packedCopyWidth(mlir::Operation *op);

/// The body of slice or concat `op` over packets of `width` elements: item
/// `i` copies result elements [i * width, (i + 1) * width).
mlir::LogicalResult emitPackedCopyBody(mlir::Operation *op, int width,
                                       BodyContext &c);

/// Result elements that one item of slice, transpose or concat `op` copies
/// on a target that copies runs (Target::copiesRuns): a slice's or
/// transpose's trailing result dimensions that lie contiguous in its input
/// too, a concat's whole rows along and inside its axis; 1 when that is
/// shorter than 8 elements (one element an item then).
int64_t copyRunElements(mlir::Operation *op);

/// The body of slice, transpose or concat `op` over runs of `run` result
/// elements (copyRunElements): item `i` copies result elements
/// [i * run, (i + 1) * run), an inner loop the host compiler vectorizes.
mlir::LogicalResult emitRunCopyBody(mlir::Operation *op, int64_t run,
                                    BodyContext &c);

/// On a target that packs elementwise kernels: the elements of one packet
/// (4) when `op` is an AdamW update of `items` elements, a multiple of 4,
/// whose operands and copy each fit one 8- or 16-byte load per packet,
/// else 1.
int packedAdamWWidth(mlir::Operation *op, int64_t items);

/// On a target that packs elementwise kernels: the elements one work item
/// of `op`'s generated kernel takes, a slice's or concat's 16-byte packet
/// (packedCopyWidth) or an AdamW update's (packedAdamWWidth) of `items`
/// elements, else 1. The emitter launches workItems / this many items, and
/// the launch model prices as many.
int packedItemWidth(mlir::Operation *op, int64_t items);

/// The body of AdamW `op` over packets of `width` elements: item `i`
/// updates elements [i * width, (i + 1) * width) with one vector load and
/// store per operand.
mlir::LogicalResult emitPackedAdamWBody(mlir::Operation *op, int width,
                                        BodyContext &c);

} // namespace otc

#endif // OTC_CODEGEN_KERNELBODIES_H
