//===- Interpreter.cpp - reference interpreter of the otc dialect ---------===//
//
// Evaluates a func.func of `otc` ops op by op, in program order, holding every
// value as a row-major array of doubles. This file holds the dispatch from an
// op to its function, the constant op, the dropout hash and the entry point;
// the op functions themselves are in one file per family (see
// InterpreterImpl.h), each following the op's description in ir/OtcOps.td
// with the plainest possible loops.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"
#include "ir/TypeBytes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>
#include <optional>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

//===----------------------------------------------------------------------===//
// Dropout mask
//===----------------------------------------------------------------------===//

/// The splitmix64 finalizer (Steele, Lea, Flood 2014) applied to `z`: adds the
/// golden-ratio increment, then two xor-shift-multiply rounds and a final
/// xor-shift. All arithmetic is modulo 2^64.
static uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The dropout mask, a pure function of (key, stream, flat element index):
///   h = splitmix64((key * 0x9E3779B97F4A7C15) ^ (stream << 32) ^ index)
///   u = (h >> 11) * 2^-53            (uniform in [0, 1), 53 bits)
///   keep = u >= ratio
/// with key, stream and index as uint64 (key and stream are the two's
/// complement bits of the i64 values) and wrap-around multiplication.
bool otc::interp::dropoutKeep(uint64_t key, uint64_t stream, uint64_t index,
                              double ratio) {
  uint64_t h =
      splitmix64((key * 0x9E3779B97F4A7C15ull) ^ (stream << 32) ^ index);
  double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u >= ratio;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::evaluate(Operation *op) {
  using namespace otc;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ConstantOp,
            // Elementwise.
            AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp, TanhOp,
            ReluOp, SqrtOp, ReciprocalOp, ErfOp, SigmoidOp, CosOp, SinOp,
            CompareOp, SelectOp, CastOp,
            // Data movement.
            MatMulOp, TransposeOp, ReshapeOp, BroadcastOp, ConcatOp, SliceOp,
            SliceGradOp, GatherOp, GatherGradOp, ExpertMatmulOp,
            ExpertMatmulWgradOp, TriluOp,
            // Reductions and normalization.
            ReduceSumOp, ReduceMaxOp, TopKOp, SoftmaxOp, SoftmaxGradOp,
            LogSoftmaxOp, LogSoftmaxGradOp,
            // Training.
            DropoutOp, DropoutGradOp, SoftmaxCrossEntropyOp,
            SoftmaxCrossEntropyGradOp, NllLossOp, NllLossGradOp, ReluGradOp,
            TanhGradOp, AdamWOp,
            // Fused transformer ops.
            AttentionOp, AttentionGradOp, LayerNormOp, LayerNormGradOp,
            RmsNormOp, RmsNormGradOp, RopeOp, GeluOp, GeluGradOp, SiluOp,
            SiluGradOp, CrossEntropyOp, CrossEntropyGradOp,
            CrossEntropyWithGradOp, LinearCrossEntropyWithGradOp, ColumnSumOp>(
          [&](auto concrete) { return run(concrete); })
      .Default([&](Operation *other) {
        return other->emitError("cannot interpret '")
               << other->getName() << "'";
      });
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

/// Decodes the element of type `type` stored little-endian at `bytes` to a
/// double, or nullopt for an unsupported element type.
static std::optional<double> decodeElement(Type type, const char *bytes) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, bytes, sizeof(v));
    return v;
  };
  if (type.isF32())
    return static_cast<double>(load(float()));
  if (type.isF64())
    return load(double());
  if (type.isF16() || type.isBF16()) {
    APFloat f(cast<FloatType>(type).getFloatSemantics(),
              APInt(16, load(uint16_t())));
    return f.convertToDouble();
  }
  if (type.isInteger(64))
    return static_cast<double>(load(int64_t()));
  if (type.isInteger(32))
    return static_cast<double>(load(int32_t()));
  if (type.isInteger(1))
    return load(uint8_t()) ? 1.0 : 0.0;
  return std::nullopt;
}

/// Dense (splat or not) and dense-resource constants, float or integer.
LogicalResult Interpreter::run(otc::ConstantOp op) {
  Tensor out = zeros(shapeOf(op.getResult()));
  Type elementType = getElementTypeOrSelf(op.getResult().getType());
  Attribute value = op.getValue();
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    // getValues repeats a splat value for every element.
    int64_t i = 0;
    if (isa<FloatType>(elementType)) {
      for (APFloat f : dense.getValues<APFloat>())
        out.data[i++] = f.convertToDouble();
    } else if (elementType.isInteger(1)) {
      for (bool b : dense.getValues<bool>())
        out.data[i++] = b ? 1.0 : 0.0;
    } else {
      for (APInt v : dense.getValues<APInt>())
        out.data[i++] = static_cast<double>(v.getSExtValue());
    }
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return op.emitError("constant data of resource '")
             << resource.getRawHandle().getKey() << "' is not available";
    ArrayRef<char> bytes = blob->getData();
    int64_t width = otc::storageBytes(elementType);
    if (static_cast<int64_t>(bytes.size()) != width * elementCount(out.shape))
      return op.emitError("constant resource has ")
             << bytes.size() << " bytes, expected "
             << width * elementCount(out.shape);
    for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
      std::optional<double> v =
          decodeElement(elementType, bytes.data() + i * width);
      if (!v)
        return op.emitError("unsupported constant element type ")
               << elementType;
      out.data[i] = *v;
    }
  } else {
    return op.emitError("cannot interpret constant attribute ") << value;
  }
  set(op.getResult(), std::move(out));
  return success();
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

/// Rounds the results of `op` of BF16 element type to BF16 (nearest even).
static void roundBf16Results(Operation &op, Interpreter &interpreter) {
  for (Value r : op.getResults()) {
    if (!getElementTypeOrSelf(r.getType()).isBF16())
      continue;
    Tensor t = interpreter.get(r);
    for (double &x : t.data) {
      APFloat f(x);
      bool lost = false;
      f.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
      x = f.convertToDouble();
    }
    interpreter.set(r, std::move(t));
  }
}

FailureOr<std::vector<Tensor>> otc::interp::runFunction(func::FuncOp func,
                                                        ArrayRef<Tensor> args,
                                                        bool roundBf16) {
  return runFunction(func, std::vector<Tensor>(args.begin(), args.end()),
                     roundBf16);
}

FailureOr<std::vector<Tensor>>
otc::interp::runFunction(func::FuncOp func, std::vector<Tensor> &&args,
                         bool roundBf16) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitError("cannot interpret @")
           << func.getSymName() << ": it must have exactly one block";
  Block &body = func.getBody().front();
  if (args.size() != body.getNumArguments())
    return func.emitError("@")
           << func.getSymName() << " takes " << body.getNumArguments()
           << " arguments, got " << args.size();

  Interpreter interpreter;
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    std::vector<int64_t> expected = shapeOf(arg);
    if (args[i].shape != expected ||
        static_cast<int64_t>(args[i].data.size()) != elementCount(expected))
      return func.emitError("argument ")
             << i << " of @" << func.getSymName() << " does not match its type "
             << arg.getType();
    if (!arg.use_empty())
      interpreter.set(arg, std::move(args[i]));
  }
  args.clear();

  // The values whose last reader (an op of the body, or one nested in it)
  // each op is: dropped once it has run, so that the interpreter holds the
  // live values only (a 0.6B model's forward held 19 GB with every value).
  llvm::DenseMap<Operation *, SmallVector<Value>> lastReadBy;
  {
    llvm::DenseMap<Value, Operation *> lastReader;
    for (Operation &op : body)
      op.walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          lastReader[v] = &op;
      });
    for (auto [v, op] : lastReader)
      lastReadBy[op].push_back(v);
  }

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(interpreter.get(v));
      return results;
    }
    if (failed(interpreter.evaluate(&op)))
      return failure();
    if (roundBf16)
      roundBf16Results(op, interpreter);
    for (Value v : lastReadBy.lookup(&op))
      interpreter.erase(v);
    for (Value r : op.getResults())
      if (r.use_empty())
        interpreter.erase(r);
  }
  return func.emitError("@")
         << func.getSymName() << " does not end in func.return";
}
