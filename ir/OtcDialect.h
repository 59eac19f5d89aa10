//===- OtcDialect.h - the otc tensor dialect ---------------------*- C++ -*-===//
//
// Declares the `otc` dialect, its ops and its interfaces.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_OTCDIALECT_H
#define OTC_IR_OTCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>
#include <string>
#include <vector>

#include "ir/OtcDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/OtcAttrs.h.inc"

namespace mlir::OpTrait {
/// The marker traits of ir/OtcBase.td (elementwise, precision rules): no
/// verification, queried with op->hasTrait<...>().
template <typename ConcreteType>
class OtcElementwise : public TraitBase<ConcreteType, OtcElementwise> {};
template <typename ConcreteType>
class OtcFp32Compute : public TraitBase<ConcreteType, OtcFp32Compute> {};
template <typename ConcreteType>
class OtcBF16Product : public TraitBase<ConcreteType, OtcBF16Product> {};
template <typename ConcreteType>
class OtcGradientSum : public TraitBase<ConcreteType, OtcGradientSum> {};
template <typename ConcreteType>
class OtcKeepPrecision : public TraitBase<ConcreteType, OtcKeepPrecision> {};
} // namespace mlir::OpTrait

namespace otc::detail {
/// Elements of all results: the default FLOPs of CostOpInterface.
int64_t resultElements(mlir::Operation *op);
/// Bytes of all operands and of all results (i1 takes a byte).
int64_t operandBytes(mlir::Operation *op);
int64_t resultBytes(mlir::Operation *op);
} // namespace otc::detail

namespace otc {
/// One argument of a kernel library call (LibraryCallOpInterface): an
/// integer or float scalar, a pointer to an operand's or a result's buffer,
/// NULL, or a struct of such fields passed by address.
/// "otcrt_<name>_f32" or "_bf16" by the element type of `data`: the kernel
/// library function a LibraryCallOpInterface op calls.
std::string libraryKernelName(llvm::StringRef name, mlir::Value data);

struct LibraryArg {
  enum Kind { Int, Float, Operand, Result, Null, Struct } kind = Int;
  int64_t value = 0;
  double real = 0.0;
  /// The operand or result number.
  unsigned index = 0;
  /// Struct: the C type and its fields, in order.
  std::string structType;
  std::vector<LibraryArg> fields;
  /// Operand or Result: elements past the start of its buffer.
  int64_t offset = 0;

  static LibraryArg integer(int64_t v) { return {Int, v}; }
  static LibraryArg floating(double v) { return {Float, 0, v}; }
  static LibraryArg result(unsigned i) { return {Result, 0, 0.0, i}; }
  static LibraryArg null() { return {Null}; }
  /// `v`, an operand of `op` (NULL when `v` is null: an absent optional).
  static LibraryArg operand(mlir::Operation *op, mlir::Value v);
  /// This operand or result `elements` further into its buffer.
  LibraryArg at(int64_t elements) const {
    LibraryArg a = *this;
    a.offset += elements;
    return a;
  }
};

/// One GEMM a library call makes (otcrt_gemm): C[m, n] (+)= op(A)[m, k] op(B)[k, n]
/// with operands of `bf16` or f32 storage, `bytes` read and written.
struct LibraryGemm {
  /// What the product is ("head", "dW"), for people.
  std::string what;
  int64_t m = 0, n = 0, k = 0;
  bool bf16 = false;
  double bytes = 0;
  /// Bytes its epilogue moves per element of the result: written, plus
  /// read when the product adds to it.
  double epilogueBytes = 0;
  /// Whether the runtime's own kernel computes it (the experts' products)
  /// rather than the GEMM library: the device model says what share of the
  /// library's rate such a kernel reaches (DeviceModel::ownGemmShare).
  bool ownKernel = false;
};

/// The chunks of an otc.linear_cross_entropy_with_grad over `rows` rows in
/// chunks of `chunk` rows, as (rows of a chunk, how many such chunks): the
/// full chunks, then the rest.
llvm::SmallVector<std::pair<int64_t, int64_t>, 2> lossChunks(int64_t rows,
                                                             int64_t chunk);

/// The sizes of an otc.attention or otc.attention_grad in [B, H, T, D] terms
/// whatever its layout: q [b, h, t, d], k and v [b, hk, s, d], and
/// `rowStride`, the elements from one (b, t) row of q, k and v to the next
/// when that is not their heads' length: (h + 2 hk)·d under layout
/// "packed", else 0.
struct AttentionSizes {
  int64_t b, h, hk, t, s, d;
  int64_t rowStride;
};
AttentionSizes attentionSizes(mlir::Operation *op);
/// The keys an otc.attention or otc.attention_grad counts per query in its
/// FLOPs: S, a causal sliding window's W when W < S = T, a bidirectional
/// one's 2 W - 1 when that is below S.
int64_t attentionCountedKeys(mlir::Operation *op);

/// `v` with the otc.reshape ops that produced it stripped.
mlir::Value throughReshapes(mlir::Value v);

/// `grad` (the gradient of a result broadcast from `operand`) summed back to
/// `operand`'s shape: over the dimensions it broadcasts, then reshaped.
mlir::Value sumToShape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                       mlir::Value operand);

} // namespace otc

#include "ir/ScalarExpr.h"

#include "ir/OtcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/OtcOps.h.inc"

namespace otc {

/// Names of the attributes that tie function arguments and results to what
/// they are in the model and in the arena.
namespace attrs {
/// On a forward function argument: the ONNX graph input it binds.
constexpr const char kInput[] = "otc.input";
/// On the module (otc-training-loop): the graph input whose entries other
/// than otc.count_ignore_index are the loss's terms (a mean over them), so
/// that micro-batches weigh in a step by their count of such entries.
constexpr const char kCountInput[] = "otc.count_input";
constexpr const char kCountIgnoreIndex[] = "otc.count_ignore_index";
/// On a forward function argument: the ONNX float initializer it binds.
constexpr const char kParam[] = "otc.param";
/// On a parameter argument whose initializer the exporter folded from a
/// module parameter of another name (the dynamo optimizer's `val_N`, a
/// Wᵀ): that parameter's name, which --freeze also matches.
constexpr const char kParamOf[] = "otc.param_of";
/// With kParamOf: that name is a guess from the module scope of the only
/// additions that read the initializer (a value the TorchScript exporter
/// folded, which may be a buffer: BART's final_logits_bias), so --freeze
/// also matches the initializer's own name.
constexpr const char kParamOfGuessed[] = "otc.param_of_guessed";
/// On an `otc.param` argument: a constant buffer of the model (a rotary
/// table), never trained: no gradient, moments or master; its slot is a
/// "buffer:" slot.
constexpr const char kBuffer[] = "otc.buffer";
/// On the forward function (the importer): the float initializers that were
/// not made parameters, name -> why ("a single element", "non-finite values
/// (a mask)"), and the ones joined to another as its copy, name -> "copy of
/// X" or "transpose of X". Reports and plan.json list them.
constexpr const char kUntrained[] = "otc.untrained";
constexpr const char kTied[] = "otc.tied";
/// On the forward function: parameters the exporter had merged into one
/// initializer (equal values, read by several modules) given back their own
/// tensor, name -> "own copy of X ...".
constexpr const char kSplit[] = "otc.split";
/// On the forward function: parameters of the exported module (the dynamo
/// exporter's graph signature) that no initializer holds, name -> why.
constexpr const char kRemoved[] = "otc.removed";
/// On the forward function: a folded projection weight that may be the
/// tied copy of an embedding table, where the values cannot say (few
/// distinct: a sparse file made to size the model) and no exporter record
/// does, name -> why; it was imported untied, and otc-compile warns.
constexpr const char kUndecidedTies[] = "otc.undecided_ties";
/// On the forward function: trained values the TorchScript exporter folded
/// that only additions read, which may be buffers (BART's
/// final_logits_bias) as well as parameters, name -> why; otc-compile
/// warns.
constexpr const char kUndecidedParams[] = "otc.undecided_params";
/// On the module (the importer): the batch the export fixed (i64), which
/// --micro-batch re-bound; reports say so.
constexpr const char kReboundBatch[] = "otc.rebound_batch";
/// Module: the integer inputs that GatherElements or ScatterElements index
/// with as they are fed, each with the size of its axis (the least of its
/// uses): {name = size}; codegen/IndexRanges.cpp makes them index ranges.
constexpr const char kIndexBounds[] = "otc.index_bounds";
/// On a forward function argument: the [B, K] positions input
/// (otc-sparse-prediction), rows of the micro-batch's B x T whose loss is
/// computed; on the module: {input, targets, positions = K, of = T, ops,
/// classes, ignore_index}, what the runtime chooses those rows from.
constexpr const char kPredictionRows[] = "otc.prediction_rows";
/// On a forward function argument: the per-micro-step random key.
constexpr const char kRngKey[] = "otc.rng_key";
/// On a function result: the ONNX graph output it is.
constexpr const char kOutput[] = "otc.output";
/// On a train-step result: the parameter whose gradient it is.
constexpr const char kGrad[] = "otc.grad";
/// On a train-step result: marks the loss.
constexpr const char kLoss[] = "otc.loss";
/// On arguments/results of the training-loop functions: the arena slot.
constexpr const char kSlot[] = "otc.slot";
/// On a train-step argument (otc-mixed-precision): the parameter is the BF16
/// working copy of the FP32 master weights named by `otc.param`.
constexpr const char kBf16Copy[] = "otc.bf16_copy";
/// On an op: otc-mixed-precision keeps it in FP32.
constexpr const char kKeepFp32[] = "otc.keep_fp32";
/// On the module: the fused ops by kind (otc-fuse-patterns), and the
/// recomputation chosen (otc-remat: policy, blocks, recompute_flops, saved,
/// recomputed), which plan.json and the report give (readPassRecords).
constexpr const char kFused[] = "otc.fused";
constexpr const char kRemat[] = "otc.remat";
/// On the module (otc-compile, before recomputation): what one micro-step
/// is worth for a throughput report, {tokens = i64, flops = i64}: the
/// tokens it reads (0: it counts samples) and its model FLOPs, which the
/// emitter writes into the program's descriptor (ABI version 11).
constexpr const char kMicroStep[] = "otc.micro_step";
} // namespace attrs

/// Returns the tensor type with `shape` and the element type of `like`.
mlir::RankedTensorType withShape(mlir::Type like, llvm::ArrayRef<int64_t> shape);

/// When `round` rounds to BF16 the FP32 result of an otc.gather_grad (no
/// acc) of a widened BF16 gradient, and nothing else reads that result:
/// replaces the three ops by one gather_grad of BF16 storage and returns it
/// (the same bits: widening is exact, and the library sums in FP32 and
/// rounds once either way); null otherwise, changing nothing. Used by
/// otc-fuse-reductions, and by otc-training-loop for the terms of a tied
/// weight's gradient that it rounds.
GatherGradOp narrowGatherGrad(CastOp round);

} // namespace otc

#endif // OTC_IR_OTCDIALECT_H
