//===- Launches.cpp - what the program launches for each otck op
//-----------===//
//
// Trace names, zero fills and the vector width of generated chains, shared by
// the emitter and the step-time prediction (see Launches.h).
//
//===----------------------------------------------------------------------===//

#include "codegen/Launches.h"
#include "codegen/KernelBodies.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace otc;

std::string otc::nodeName(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (auto s = nodeName(l); !s.empty())
        return s;
  return "";
}

std::string otc::traceName(StringRef node, StringRef what) {
  if (node.empty())
    return what.str();
  return (node + " (" + what + ")").str();
}

std::pair<std::string, std::string> otc::chainNodeAndWhat(otck::KernelOp k) {
  SmallVector<std::string> opNames;
  std::string node;
  for (Operation &op : k.getBody().front().without_terminator()) {
    opNames.push_back(op.getName().getStringRef().str());
    if (std::string n = nodeName(op.getLoc()); !n.empty())
      node = n;
  }
  if (opNames.size() > 6) {
    opNames.resize(6);
    opNames.push_back("...");
  }
  return {node, "fused " + llvm::join(opNames, " ")};
}

std::string otc::kernelTraceName(otck::KernelOp k) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator())) {
    auto [node, what] = chainNodeAndWhat(k);
    return traceName(node, what);
  }
  Operation &op = body.front();
  return traceName(nodeName(op.getLoc()), op.getName().getStringRef());
}

std::string otc::gemmTraceName(otck::GemmOp g) {
  return traceName(nodeName(g.getLoc()), "gemm");
}

std::string otc::fp8QuantizeTraceName(otck::Fp8QuantizeOp q) {
  return traceName(nodeName(q.getLoc()), "fp8_quantize");
}

std::optional<std::pair<int64_t, int64_t>> otc::zeroFill(Operation &op) {
  auto k = dyn_cast<otck::KernelOp>(op);
  if (!k || !k.getInputs().empty() || k.getOutputs().size() != 1)
    return std::nullopt;
  Block &body = k.getBody().front();
  auto c = dyn_cast<ConstantOp>(body.front());
  auto buf = k.getOutputs()[0].getDefiningOp<otck::BufferOp>();
  auto attr = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  if (!buf || !buf.getOffset() || !attr || !attr.isSplat() ||
      !llvm::hasSingleElement(body.without_terminator()))
    return std::nullopt;
  bool zero = isa<FloatType>(attr.getElementType())
                  ? attr.getSplatValue<APFloat>().isPosZero()
                  : attr.getSplatValue<APInt>().isZero();
  if (!zero)
    return std::nullopt;
  MemRefType t = buf.getType();
  return std::make_pair(static_cast<int64_t>(*buf.getOffset()),
                        t.getNumElements() * storageBytes(t.getElementType()));
}

bool ZeroFills::take(Operation &op, Memset memset) {
  std::optional<std::pair<int64_t, int64_t>> z = zeroFill(op);
  if (!z)
    return false;
  if (pending) {
    int64_t end = pending->first + pending->second;
    if ((end + alignment - 1) / alignment * alignment == z->first) {
      pending->second = z->first + z->second - pending->first;
      return true;
    }
    flush(memset);
  }
  pending = z;
  return true;
}

void ZeroFills::flush(Memset memset) {
  if (pending)
    memset(pending->first, pending->second);
  pending.reset();
}

bool otc::emittedAsChain(otck::KernelOp k) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return true;
  return isa<ScalarExpressionOpInterface>(body.front()) &&
         isElementwiseKernel(k);
}

bool otc::readBySlicesAlone(BlockArgument arg) {
  return !arg.use_empty() && llvm::all_of(arg.getUsers(), [](Operation *u) {
    return isa<SliceOp>(u);
  });
}

int otc::chainVectorWidth(otck::KernelOp k) {
  Block &body = k.getBody().front();
  auto domainType = cast<MemRefType>(k.getOutputs()[0].getType());
  ArrayRef<int64_t> domain = domainType.getShape();
  bool vectorizable = true, allBf16 = true;
  auto check = [&](Value v, bool sliced) {
    auto t = cast<MemRefType>(v.getType());
    Type et = t.getElementType();
    allBf16 &= et.isBF16();
    vectorizable &=
        (sliced || t.getShape() == domain) && (et.isF32() || et.isBF16());
  };
  for (auto [i, v] : llvm::enumerate(k.getInputs()))
    if (!body.getArgument(i).use_empty())
      check(v, readBySlicesAlone(body.getArgument(i)));
  for (Value v : k.getOutputs())
    check(v, false);
  const int width = allBf16 ? 8 : 4;
  // A folded slice gives whole packets: unit stride along the last axis,
  // which the packet (and its first element) divides on both sides.
  for (Operation &op : body.without_terminator())
    if (auto slice = dyn_cast<SliceOp>(op)) {
      ArrayRef<int64_t> in =
          cast<RankedTensorType>(slice.getInput().getType()).getShape();
      vectorizable &= !in.empty() && slice.getStrides().back() == 1 &&
                      in.back() % width == 0 && domain.back() % width == 0 &&
                      slice.getStarts().back() % width == 0;
    }
  return vectorizable && domainType.getNumElements() >= width ? width : 1;
}
