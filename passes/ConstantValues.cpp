//===- ConstantValues.cpp - values of constants, computed once -------------===//
//
// See ConstantValues.h. A value computed from constants and untrained
// buffers alone (a rotary table from its frequencies and positions, a
// causal mask from positions, too large to fold at import) is the same in
// every call of every step function; each one a step function reads is computed once, by
// `@constant_values`, into a persistent slot private to the generated code
// ("const:v<n>"), which otc-lower-to-buffers runs inside `@init_constants`.
// Equal computations (the same ops of the same constants in micro_step,
// eval_step and decode_step) share one.
//
//===----------------------------------------------------------------------===//

#include "passes/ConstantValues.h"
#include "ir/OtcDialect.h"
#include "ir/TypeBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace otc;

namespace {

/// The largest value given a slot (as otc-lower-to-buffers' constants):
/// persistent bytes are held for the whole run.
constexpr int64_t kMaxBytes = 64ll << 20;

/// Whether `op` computes its results from its operands alone, the same
/// every call.
bool isComputation(Operation *op) {
  return !isa<ConstantOp, DropoutOp>(op) && op->getNumRegions() == 0 &&
         op->getNumOperands() > 0 && isMemoryEffectFree(op);
}

class Hoister {
public:
  explicit Hoister(ModuleOp module) : module(module), b(module.getContext()) {}

  void hoist(func::FuncOp f);
  void finish();

private:
  ModuleOp module;
  OpBuilder b;
  func::FuncOp values;
  /// Ops of @constant_values, to share equal computations.
  SmallVector<Operation *> made;
  /// The slot of each value @constant_values returns.
  DenseMap<Value, std::string> slots;
  SmallVector<Value> results;

  /// `op` (whose operands are mapped in `map`) in @constant_values: an
  /// equal op made before, or a new clone.
  Operation *share(Operation *op, IRMapping &map);
  /// @constant_values' argument on `slot` (a "buffer:" slot).
  Value bufferArgument(StringAttr slot, Type type, Location loc);
  /// The ops of `f` that compute from constants and untrained buffers
  /// alone; `read` gets their values that something else reads (at most
  /// kMaxBytes each, not of splats alone).
  SmallVector<Operation *> constantComputations(func::FuncOp f,
                                                SmallVector<Value> &read);
  /// The computation of each of `read` in @constant_values (made on first
  /// use), `map` taking `f`'s values to its.
  void computeInValues(func::FuncOp f, ArrayRef<Value> read, IRMapping &map);
};

Operation *Hoister::share(Operation *op, IRMapping &map) {
  for (Operation *m : made) {
    if (m->getName() != op->getName() ||
        m->getAttrDictionary() != op->getAttrDictionary() ||
        m->getResultTypes() != op->getResultTypes() ||
        m->getNumOperands() != op->getNumOperands())
      continue;
    bool same = true;
    for (auto [a, o] : llvm::zip(m->getOperands(), op->getOperands()))
      same &= a == map.lookup(o);
    if (same) {
      map.map(op->getResults(), m->getResults());
      return m;
    }
  }
  Operation *n = b.clone(*op, map);
  made.push_back(n);
  return n;
}

Value Hoister::bufferArgument(StringAttr slot, Type type, Location loc) {
  for (unsigned i = 0, e = values.getNumArguments(); i < e; ++i)
    if (values.getArgAttrOfType<StringAttr>(i, attrs::kSlot) == slot)
      return values.getArgument(i);
  unsigned at = values.getNumArguments();
  (void)values.insertArgument(
      at, type, b.getDictionaryAttr(b.getNamedAttr(attrs::kSlot, slot)), loc);
  return values.getArgument(at);
}

SmallVector<Operation *>
Hoister::constantComputations(func::FuncOp f, SmallVector<Value> &read) {
  Block &body = f.getBody().front();
  // Values of constants alone, and the ops computing them; those of
  // splat constants alone (a broadcast of 1 / N) stay: a fill in the call
  // is as cheap, and takes no persistent bytes.
  llvm::DenseSet<Value> fixed, ofSplats;
  SmallVector<Operation *> computed;
  // Untrained FP32 buffers (a rotary table's frequencies) are loaded before
  // the values are computed, and never change.
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i)
    if (auto slot = f.getArgAttrOfType<StringAttr>(i, attrs::kSlot);
        slot && slot.getValue().starts_with("buffer:"))
      fixed.insert(f.getArgument(i));
  for (Operation &op : body.without_terminator()) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      fixed.insert(c.getResult());
      if (auto d = dyn_cast<DenseElementsAttr>(c.getValue()); d && d.isSplat())
        ofSplats.insert(c.getResult());
      continue;
    }
    if (!isComputation(&op) || !llvm::all_of(op.getOperands(), [&](Value v) {
          return fixed.contains(v);
        }))
      continue;
    fixed.insert(op.result_begin(), op.result_end());
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return ofSplats.contains(v); }))
      ofSplats.insert(op.result_begin(), op.result_end());
    computed.push_back(&op);
  }
  // The computed values something else reads.
  for (Operation *op : computed)
    for (Value r : op->getResults())
      if (byteSize(r) <= kMaxBytes && !ofSplats.contains(r) &&
          llvm::any_of(r.getUsers(), [&](Operation *u) {
            return u->hasTrait<OpTrait::IsTerminator>() ||
                   !llvm::is_contained(computed, u);
          }))
        read.push_back(r);
  return computed;
}

void Hoister::computeInValues(func::FuncOp f, ArrayRef<Value> read,
                              IRMapping &map) {
  if (!values) {
    b.setInsertionPointToEnd(module.getBody());
    values = b.create<func::FuncOp>(f.getLoc(), "constant_values",
                                    b.getFunctionType({}, {}));
    values.addEntryBlock();
  }
  b.setInsertionPointToEnd(&values.getBody().front());
  // Each value's computation in @constant_values (constants included).
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> work(read.begin(), read.end());
  while (!work.empty()) {
    Operation *d = work.pop_back_val().getDefiningOp();
    if (d && needed.insert(d).second)
      work.append(d->operand_begin(), d->operand_end());
  }
  for (Operation &op : f.getBody().front().without_terminator()) {
    if (!needed.contains(&op))
      continue;
    // A buffer read: @constant_values' argument on the same slot.
    for (Value o : op.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(o); arg && !map.contains(o))
        map.map(o, bufferArgument(f.getArgAttrOfType<StringAttr>(
                                      arg.getArgNumber(), attrs::kSlot),
                                  o.getType(), o.getLoc()));
    share(&op, map);
  }
}

void Hoister::hoist(func::FuncOp f) {
  SmallVector<Value> read;
  SmallVector<Operation *> computed = constantComputations(f, read);
  if (read.empty())
    return;
  IRMapping map;
  computeInValues(f, read, map);
  // Each read value becomes an argument of `f` on its slot (one per slot).
  llvm::StringMap<BlockArgument> argOf;
  for (Value r : read) {
    Value v = map.lookup(r);
    auto [it, fresh] =
        slots.try_emplace(v, "const:v" + std::to_string(slots.size()));
    if (fresh)
      results.push_back(v);
    BlockArgument &arg = argOf[it->second];
    if (!arg) {
      unsigned at = f.getNumArguments();
      (void)f.insertArgument(at, r.getType(),
                             b.getDictionaryAttr(b.getNamedAttr(
                                 attrs::kSlot, b.getStringAttr(it->second))),
                             r.getLoc());
      arg = f.getArgument(at);
    }
    r.replaceUsesWithIf(arg, [&](OpOperand &use) {
      return !llvm::is_contained(computed, use.getOwner());
    });
  }
  // The computations (and constants) nothing in `f` reads any more.
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if ((isa<ConstantOp>(op) || llvm::is_contained(computed, op)) &&
        isOpTriviallyDead(op))
      op->erase();
}

void Hoister::finish() {
  if (!values)
    return;
  b.setInsertionPointToEnd(&values.getBody().front());
  b.create<func::ReturnOp>(values.getLoc(), results);
  SmallVector<Type> types;
  for (Value r : results)
    types.push_back(r.getType());
  values.setFunctionType(
      b.getFunctionType(values.getArgumentTypes(), types));
  for (auto [i, r] : llvm::enumerate(results))
    values.setResultAttr(i, attrs::kSlot, b.getStringAttr(slots[r]));
}

} // namespace

void otc::hoistConstantValues(ModuleOp module, ArrayRef<StringRef> functions) {
  Hoister h(module);
  for (StringRef name : functions)
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      h.hoist(f);
  h.finish();
}
