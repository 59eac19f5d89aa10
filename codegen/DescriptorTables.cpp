//===- DescriptorTables.cpp - the tables of a program's descriptor --------===//
//
// See DescriptorTables.h. Slots the runtime does not know (the BF16 working
// copies of the weights, "param_bf16:<name>", the constants filled once,
// "const:<n>", and the parameter groups) live in the arena but stay out of
// the slot table. Before the tables, it checks what the runtime's
// checkpoints rely on: no function writes a BUFFER slot.
//
//===----------------------------------------------------------------------===//

#include "codegen/DescriptorTables.h"
#include "codegen/IndexRanges.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <tuple>
#include <vector>

using namespace mlir;
using namespace otc;

namespace {

/// A slot of the program's table.
struct Slot {
  std::string kind, name;
  MemRefType type;
  int64_t offset;
};

/// Kind enumerator and ONNX name of a slot string ("param:fc1.weight").
std::pair<std::string, std::string> splitSlot(StringRef slot) {
  static const std::pair<const char *, const char *> kinds[] = {
      {"param", "OTC_SLOT_PARAM"},   {"grad", "OTC_SLOT_GRAD"},
      {"adam_m", "OTC_SLOT_ADAM_M"}, {"adam_v", "OTC_SLOT_ADAM_V"},
      {"input", "OTC_SLOT_INPUT"},   {"loss", "OTC_SLOT_LOSS"},
      {"lr", "OTC_SLOT_LR"},         {"step", "OTC_SLOT_STEP"},
      {"rng_key", "OTC_SLOT_RNG"},   {"grad_scale", "OTC_SLOT_GRAD_SCALE"},
      {"buffer", "OTC_SLOT_BUFFER"}, {"grad_factor", "OTC_SLOT_GRAD_FACTOR"},
      {"decode_tokens", "OTC_SLOT_DECODE_TOKENS"},
      {"decode_position", "OTC_SLOT_DECODE_POSITION"},
      {"kv_cache", "OTC_SLOT_KV_CACHE"}, {"logits", "OTC_SLOT_LOGITS"}};
  auto [prefix, name] = slot.split(':');
  for (auto [p, e] : kinds)
    if (prefix == p)
      return {e, name.str()};
  return {"", ""};
}

const char *dtypeEnum(Type t) {
  if (t.isF32())
    return "OTC_F32";
  if (t.isBF16())
    return "OTC_BF16";
  if (t.isF64())
    return "OTC_F64";
  if (t.isInteger(64))
    return "OTC_I64";
  if (t.isInteger(32))
    return "OTC_I32";
  if (t.isInteger(1))
    return "OTC_BOOL";
  return nullptr;
}

/// Slot prefixes of state private to the generated code: planned in the
/// arena, absent from the runtime's slot table.
bool isPrivateSlot(StringRef slot) {
  return slot.starts_with("param_bf16:") || slot.starts_with("const:") ||
         slot.starts_with("fp8_copy:") || otck::isGroupSlot(slot);
}

/// The BUFFER slot whose bytes `storage` (a buffer op's result) holds or,
/// for a group, one of its members is; empty when none.
StringRef bufferSlotIn(Value storage) {
  auto b = storage.getDefiningOp<otck::BufferOp>();
  if (!b || !b.getSlot())
    return {};
  if (b.getSlot()->starts_with("buffer:"))
    return *b.getSlot();
  for (StringRef attr : {otck::kMembersAttr, otck::kImageMembersAttr})
    if (auto members = b->getAttrOfType<ArrayAttr>(attr))
      for (Attribute m : members)
        if (auto name = dyn_cast<StringAttr>(m);
            name && name.getValue().starts_with("buffer:"))
          return name.getValue();
  return {};
}

/// Fails, at the op, where a function of `module` writes a BUFFER slot's
/// bytes. The runtime relies on it: a buffer keeps the values it was
/// loaded with from the initial parameters, so a checkpoint records only
/// its CRC-32 and a resume loads it from the initial parameters again
/// (runtime/src/checkpoint.h).
LogicalResult checkBuffersUnwritten(ModuleOp module) {
  for (auto f : module.getOps<func::FuncOp>()) {
    WalkResult walked = f.walk<WalkOrder::PreOrder>([&](Operation *op) {
      for (Value written : otck::writtenBy(op)) {
        StringRef slot = bufferSlotIn(otck::storageOf(written));
        if (slot.empty())
          continue;
        op->emitError("internal error: @")
            << f.getSymName() << " writes the bytes of BUFFER slot '" << slot
            << "' (" << op->getName()
            << "): a buffer keeps its initial values, which checkpoints "
               "record as a CRC-32 and a resume loads from the initial "
               "parameters";
        return WalkResult::interrupt();
      }
      // A kernel's body computes on tensors; what it writes is its outputs.
      return isa<otck::KernelOp>(op) ? WalkResult::skip()
                                     : WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return failure();
  }
  return success();
}

} // namespace

std::string otc::cString(StringRef s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\')
      out += '\\';
    out += ch;
  }
  return out + "\"";
}

FailureOr<DescriptorTables>
otc::emitDescriptorTables(ModuleOp module, ConfigAttr config,
                          ArrayRef<GradientBucket> buckets) {
  if (failed(checkBuffersUnwritten(module)))
    return failure();
  DescriptorTables t;
  llvm::raw_string_ostream os(t.text);
  // The slot table, in offset order.
  llvm::StringMap<Slot> slots;
  std::vector<std::string> order;
  module.walk([&](otck::BufferOp b) {
    if (!b.getSlot() || slots.count(*b.getSlot()) ||
        isPrivateSlot(*b.getSlot()))
      return;
    auto [kind, name] = splitSlot(*b.getSlot());
    slots[*b.getSlot()] = {kind, name, b.getType(), (int64_t)*b.getOffset()};
    order.push_back(b.getSlot()->str());
  });
  for (const std::string &s : order)
    if (slots[s].kind.empty() || !dtypeEnum(slots[s].type.getElementType()))
      return module.emitError("cannot describe slot '") << s << "'";

  // One table per distinct shape (a parameter, its gradient and moments,
  // and the same weight in every layer share one).
  std::map<std::vector<int64_t>, unsigned> shapeIds;
  for (const std::string &s : order) {
    ArrayRef<int64_t> shape = slots[s].type.getShape();
    auto [it, fresh] = shapeIds.try_emplace(
        std::vector<int64_t>(shape.begin(), shape.end()), shapeIds.size());
    if (!fresh)
      continue;
    os << "static const int64_t kShape" << it->second << "[] = {";
    llvm::interleaveComma(shape, os);
    if (shape.empty())
      os << "0";
    os << "};\n";
  }
  os << "static const OtcSlot kSlots[] = {\n";
  for (const std::string &s : order) {
    const Slot &sl = slots[s];
    int64_t bytes = byteSize(sl.type);
    ArrayRef<int64_t> shape = sl.type.getShape();
    unsigned id = shapeIds[std::vector<int64_t>(shape.begin(), shape.end())];
    os << "  {" << cString(sl.name) << ", " << sl.kind << ", "
       << dtypeEnum(sl.type.getElementType()) << ", " << sl.type.getRank()
       << ", kShape" << id << ", " << sl.offset << ", " << bytes << "},\n";
  }
  os << "};\n\n";
  // The integer inputs that index a table, which the runtime checks as it
  // loads them.
  llvm::StringMap<IndexUse> uses = indexUses(module);
  size_t numRanges = 0;
  os << "static const OtcIndexRange kIndexRanges[] = {\n";
  for (size_t i = 0; i < order.size(); ++i) {
    auto it = uses.find(order[i]);
    if (it == uses.end() || it->second.bound <= 0)
      continue;
    const IndexUse &u = it->second;
    os << "  {" << i << ", "
       << (u.negative ? "OTC_INDEX_NEGATIVE"
                      : u.ignore ? "OTC_INDEX_IGNORE" : "0")
       << ", " << u.bound << ", " << (u.ignore && !u.negative ? *u.ignore : 0)
       << ", " << cString(u.what) << "},\n";
    ++numRanges;
  }
  if (!numRanges)
    os << "  {0, 0, 0, 0, \"\"},\n";
  os << "};\n\n";
  // Version 6: where ZeRO-1's groups lie (otc-group-params), when the
  // moments are sharded.
  if (config.getShardOptimizer()) {
    llvm::StringMap<otck::BufferOp> groups;
    module.walk([&](otck::BufferOp b) {
      if (b.getSlot() && otck::isGroupSlot(*b.getSlot()))
        groups.try_emplace(b.getSlot()->split(':').second, b);
    });
    for (const char *kind : {"param", "grad", "adam_m", "adam_v"})
      if (!groups.count(kind))
        return module.emitError("shard_optimizer without the group slot "
                                "'group:")
               << kind << "' (otc-group-params)";
    auto offset = [&](StringRef kind) -> int64_t {
      auto it = groups.find(kind);
      return it == groups.end() ? -1 : (int64_t)*it->second.getOffset();
    };
    otck::BufferOp grad = groups["grad"];
    llvm::raw_ostream &so = os;
    t.shards = true;
    // Without BF16 copies the steps read the parameters themselves.
    bool readsParams = otck::stepsReadParams(module) || !groups.count("param_bf16");
    so << "static const OtcOptimizerShards kShards = {"
       << config.getWorldSize() << ", "
       << dtypeEnum(grad.getType().getElementType()) << ", "
       << (readsParams ? 1 : 0) << ", "
       << (groups["param"]->hasAttr(otck::kImageMembersAttr) ? 1 : 0) << ", "
       << groups["adam_m"].getType().getNumElements() << ", "
       << offset("param") << ", " << offset("grad") << ", "
       << offset("param_bf16") << ", " << offset("adam_m") << ", "
       << offset("adam_v") << "};\n\n";
  }
  // Version 7: the buckets' ranges, each slot's (adjacent ones of one
  // type joined).
  size_t numBucketRanges = 0;
  if (!buckets.empty()) {
    llvm::raw_ostream &bo = os;
    bo << "static const OtcBucketRange kBucketRanges[] = {\n";
    for (auto [k, b] : llvm::enumerate(buckets)) {
      SmallVector<std::tuple<int64_t, int64_t, bool>> ranges;
      for (otck::BufferOp slot : b.slots)
        ranges.push_back({(int64_t)*slot.getOffset(),
                          slot.getType().getNumElements(),
                          slot.getType().getElementType().isBF16()});
      llvm::sort(ranges);
      SmallVector<std::tuple<int64_t, int64_t, bool>> joined;
      for (auto r : ranges) {
        if (!joined.empty()) {
          auto &[o, n, bf16] = joined.back();
          if (bf16 == std::get<2>(r) &&
              o + n * (bf16 ? 2 : 4) == std::get<0>(r)) {
            n += std::get<1>(r);
            continue;
          }
        }
        joined.push_back(r);
      }
      for (auto [o, n, bf16] : joined)
        bo << "  {" << k << ", " << (bf16 ? 1 : 0) << ", " << o << ", " << n
           << "},\n";
      numBucketRanges += joined.size();
    }
    bo << "};\n\n";
  }
  t.numSlots = order.size();
  t.numIndexRanges = numRanges;
  t.numBucketRanges = numBucketRanges;
  return t;
}
