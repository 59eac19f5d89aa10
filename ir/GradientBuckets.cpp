//===- GradientBuckets.cpp - gradients reduced as the backward ends them --===//

#include "ir/GradientBuckets.h"
#include "ir/Config.h"
#include "ir/TargetRegistry.h"
#include "ir/TypeBytes.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace mlir;
using namespace otc;

int64_t otc::gradientBucketBytes(int64_t gradientBytes) {
  return std::max<int64_t>(gradientBytes / 8, 64 * 1024);
}

SmallVector<GradientBucket> otc::gradientBuckets(func::FuncOp microStep,
                                                 int64_t minBytes) {
  Block &body = microStep.getBody().front();
  DenseMap<Operation *, unsigned> position;
  unsigned n = 0;
  for (Operation &op : body)
    position[&op] = n++;
  // The top-level op of the body that holds `user`.
  auto topLevel = [&](Operation *user) {
    while (user && user->getBlock() != &body)
      user = user->getParentOp();
    return user;
  };
  auto lastUser = [&](Value buffer) {
    Operation *last = nullptr;
    otck::forEachByteUser(buffer, [&](Operation *u) {
      Operation *top = topLevel(u);
      if (top && (!last || position[top] > position[last]))
        last = top;
    });
    return last;
  };
  Operation *groupLast = nullptr;
  SmallVector<std::pair<Operation *, otck::BufferOp>> slots;
  for (auto buf : body.getOps<otck::BufferOp>()) {
    if (!buf.getSlot())
      continue;
    StringRef slot = *buf.getSlot();
    if (slot == std::string(otck::kGroupSlotPrefix) + "grad") {
      groupLast = lastUser(buf);
    } else if (slot.starts_with("grad:")) {
      if (Operation *last = lastUser(buf))
        slots.push_back({last, buf});
    }
  }
  if (groupLast)
    for (auto &[last, buf] : slots)
      if (position[groupLast] > position[last])
        last = groupLast;
  std::stable_sort(slots.begin(), slots.end(), [&](auto &a, auto &b) {
    return position[a.first] < position[b.first];
  });
  SmallVector<GradientBucket> buckets;
  GradientBucket current;
  for (size_t i = 0; i < slots.size(); ++i) {
    auto [last, buf] = slots[i];
    current.slots.push_back(buf);
    current.bytes += byteSize(buf.getType());
    current.after = last;
    // Slots finished by the same op go together.
    bool sameOpNext = i + 1 < slots.size() && slots[i + 1].first == last;
    if ((current.bytes >= minBytes && !sameOpNext) || i + 1 == slots.size()) {
      buckets.push_back(std::move(current));
      current = GradientBucket();
    }
  }
  return buckets;
}

SmallVector<GradientBucket> otc::programGradientBuckets(ModuleOp module) {
  ConfigAttr config = getConfig(module);
  if (!config || config.getWorldSize() < 2 || config.getShardOptimizer())
    return {};
  const TargetEntry *target = lookupTargetEntry(config.getTarget());
  auto microStep = module.lookupSymbol<func::FuncOp>("micro_step");
  if (!target || !target->overlapsGradientSum || !microStep)
    return {};
  int64_t total = 0;
  otck::forEachSlot(module, [&](StringRef kind, otck::BufferOp b) {
    if (kind == "grad")
      total += byteSize(b.getType());
  });
  return gradientBuckets(microStep, gradientBucketBytes(total));
}
