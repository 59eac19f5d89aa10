//===- TargetRegistry.cpp - the targets a tool knows ----------------------===//

#include "ir/TargetRegistry.h"

#include "llvm/ADT/STLExtras.h"

using namespace otc;

namespace {
std::vector<TargetEntry> &entries() {
  static std::vector<TargetEntry> list;
  return list;
}
} // namespace

const TargetDevice *TargetEntry::device(llvm::StringRef deviceName) const {
  for (const TargetDevice &d : devices)
    if (d.name == deviceName)
      return &d;
  return nullptr;
}

void otc::registerTarget(TargetEntry entry) {
  for (TargetEntry &e : entries())
    if (e.name == entry.name) {
      e = std::move(entry);
      return;
    }
  entries().push_back(std::move(entry));
}

const TargetEntry *otc::lookupTargetEntry(llvm::StringRef name) {
  for (const TargetEntry &e : entries())
    if (e.name == name)
      return &e;
  return nullptr;
}

llvm::ArrayRef<TargetEntry> otc::registeredTargets() { return entries(); }

void otc::attachTargetInterfaces(mlir::Dialect &dialect) {
  for (const TargetEntry &e : entries())
    if (e.attachInterfaces)
      e.attachInterfaces(dialect);
}

std::string otc::registeredTargetNames() {
  if (entries().empty())
    return "none registered";
  std::string names;
  for (const TargetEntry &e : entries())
    names += (names.empty() ? "" : ", ") + e.name;
  return names;
}

std::string otc::registeredDeviceNames() {
  std::string names;
  for (const TargetEntry &e : entries())
    for (const TargetDevice &d : e.devices)
      names += (names.empty() ? "" : ", ") + d.name;
  return names;
}
