//===- Fp8Copies.cpp - one FP8 copy per tensor, read by every FP8 GEMM ----===//
//
// otc-fp8-copies (Passes.td): after otc-fuse-elementwise, gives the FP8
// GEMMs (ir/Fp8.h, marked by otc-fp8-gemms) their operands' FP8 copies.
// The FP8 GEMMs of a function's body that read the same buffer in the same
// format, with nothing writing that buffer (or a view of its bytes) between
// them, read one copy: an otck.fp8_quantize before the first of them writes
// it, in every layout they read it in (ir/Fp8.h fp8OperandLayout), into a
// temporary that buffer planning places like any other (so its bytes count
// in the arena, and live only until its last reader). A copy of a
// parameter's BF16 working copy ("param_bf16:<name>", which no
// micro-step writes) that @micro_step reads is instead the slot
// "fp8_copy:<format>:<name>", quantized at the end of @zero_grads, which
// the runtime calls first in every optimizer step: once per optimizer
// step, not once per micro-step, at 1 byte a value per layout kept for the
// whole run. The
// `fp8` attribute stays the one fact of which GEMMs are FP8 and in which
// formats; the copies only say where their FP8 values are.
//
// Why an explicit op on buffers rather than FP8 tensors in the tensor IR:
// every pass before this one (differentiation, scheduling, epilogue and
// elementwise fusion) keeps seeing BF16 operands and one attribute; a copy
// is a buffer of bytes (values, then their scale) that only the runtime
// reads, and its lifetime is what buffer planning already computes.
//
//===----------------------------------------------------------------------===//

#include "ir/Fp8.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace otc {
#define GEN_PASS_DEF_FP8COPIES
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The buffer whose bytes `v` are: `v` seen through views.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<otck::ViewOp>())
    v = view->getOperand(0);
  return v;
}

/// One FP8 copy: the GEMM operands (GEMM, left or not) that read it.
struct Copy {
  Value source;
  Fp8Format format;
  int64_t layouts = 0;
  SmallVector<std::pair<otck::GemmOp, bool>> readers;
};

/// The slot of a parameter's BF16 working copy, or "".
StringRef workingCopySlot(Value v) {
  auto b = v.getDefiningOp<otck::BufferOp>();
  if (!b || !b.getSlot() || !b.getSlot()->starts_with("param_bf16:"))
    return "";
  return *b.getSlot();
}

struct Fp8CopiesPass : public otc::impl::Fp8CopiesBase<Fp8CopiesPass> {
  using Fp8CopiesBase::Fp8CopiesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto zeroGrads = module.lookupSymbol<func::FuncOp>("zero_grads");
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      SmallVector<Copy> copies = collect(f.getBody().front());
      bool micro = f.getSymName() == "micro_step";
      for (Copy &c : copies)
        if (!(micro && stepWeights && zeroGrads &&
              succeeded(perStep(c, zeroGrads))))
          inPlace(c);
    }
  }

  /// The copies of `block`'s FP8 GEMMs, in the order of their first reader.
  SmallVector<Copy> collect(Block &block) {
    SmallVector<Copy> done;
    // The open copies by (buffer, format); a write to a buffer's bytes
    // closes the copies of that buffer.
    llvm::MapVector<std::pair<Value, int>, Copy> open;
    for (Operation &op : block) {
      for (Value w : otck::writtenBy(&op)) {
        Value root = rootOf(w);
        for (auto it = open.begin(); it != open.end();) {
          if (rootOf(it->first.first) != root) {
            ++it;
            continue;
          }
          done.push_back(std::move(it->second));
          it = open.erase(it);
        }
      }
      auto g = dyn_cast<otck::GemmOp>(op);
      std::optional<Fp8Operands> fp8 = g ? gemmFp8(g) : std::nullopt;
      if (!fp8)
        continue;
      for (bool lhs : {true, false}) {
        if (lhs ? g.getLhsFp8() : g.getRhsFp8())
          continue;
        Value v = lhs ? g.getLhs() : g.getRhs();
        Fp8Format format = lhs ? fp8->lhs : fp8->rhs;
        Copy &c = open[{v, static_cast<int>(format)}];
        c.source = v;
        c.format = format;
        c.layouts |= fp8OperandLayout(lhs, lhs ? g.getTransposeLhs()
                                               : g.getTransposeRhs());
        c.readers.push_back({g, lhs});
      }
    }
    for (auto &entry : open)
      done.push_back(std::move(entry.second));
    return done;
  }

  static MemRefType copyType(const Copy &c) {
    auto t = cast<MemRefType>(c.source.getType());
    return MemRefType::get({fp8CopyBytes(t.getNumElements(), c.layouts)},
                           IntegerType::get(t.getContext(), 8));
  }

  static void quantize(OpBuilder &b, Location loc, const Copy &c, Value source,
                       Value copy) {
    b.create<otck::Fp8QuantizeOp>(loc, source, copy, fp8FormatName(c.format),
                                  c.layouts);
  }

  static void read(const Copy &c, Value copy) {
    for (auto [g, lhs] : c.readers) {
      if (lhs)
        g.getLhsFp8Mutable().assign(copy);
      else
        g.getRhsFp8Mutable().assign(copy);
    }
  }

  /// The copy as a temporary quantized before its first reader.
  void inPlace(const Copy &c) {
    otck::GemmOp first = c.readers.front().first;
    OpBuilder b(first);
    Value copy = b.create<otck::BufferOp>(first.getLoc(), copyType(c),
                                          StringAttr(), IntegerAttr());
    quantize(b, first.getLoc(), c, c.source, copy);
    read(c, copy);
  }

  /// The copy of a parameter's working copy as a slot that @zero_grads
  /// quantizes last (the runtime calls it at the start of every optimizer
  /// step, after whatever wrote the working copies: the last update, or
  /// the load); fails when `c` reads no working copy.
  LogicalResult perStep(const Copy &c, func::FuncOp zeroGrads) {
    StringRef slot = workingCopySlot(c.source);
    if (slot.empty())
      return failure();
    std::string name =
        ("fp8_copy:" + fp8FormatName(c.format) + ":" + slot.split(':').second)
            .str();
    // One slot per parameter and format (a second copy of the same one,
    // after a write closed the first, stays a temporary).
    if (!slotsMade.insert(name).second)
      return failure();
    MLIRContext *ctx = zeroGrads.getContext();
    Operation *ret = zeroGrads.getBody().front().getTerminator();
    OpBuilder zb(ret);
    otck::GemmOp first = c.readers.front().first;
    Location loc = first.getLoc();
    Value working = zb.create<otck::BufferOp>(
        loc, c.source.getType(), StringAttr::get(ctx, slot), IntegerAttr());
    Value zcopy = zb.create<otck::BufferOp>(
        loc, copyType(c), StringAttr::get(ctx, name), IntegerAttr());
    quantize(zb, loc, c, working, zcopy);
    OpBuilder mb(first);
    Value mcopy = mb.create<otck::BufferOp>(
        first.getLoc(), copyType(c), StringAttr::get(ctx, name), IntegerAttr());
    read(c, mcopy);
    return success();
  }

  llvm::StringSet<> slotsMade;
};

} // namespace
