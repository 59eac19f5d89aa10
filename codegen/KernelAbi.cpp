//===- KernelAbi.cpp - the kernel library's signatures --------------------===//
//
// The signatures of otcrt/kernels.def, read from its text: each entry's
// parameter list, stringized by the preprocessor, split at its commas, T
// replaced by each storage type's name.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelAbi.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <limits>

using namespace otc;

namespace {

struct Entry {
  const char *result;
  const char *name;
  bool typed;
  const char *params;
};

// The table as text: `params` is the parenthesized list as written.
const Entry kEntries[] = {
#define OTCRT_TYPED_KERNEL(name, params) {"int", #name, true, #params},
#define OTCRT_KERNEL(ret, name, params) {#ret, #name, false, #params},
#include "otcrt/kernels.def"
#undef OTCRT_TYPED_KERNEL
#undef OTCRT_KERNEL
};

/// `text` with every whole word T replaced by `storage`.
std::string resolveT(llvm::StringRef text, llvm::StringRef storage) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto word = [&](size_t j) {
      return j < text.size() && (llvm::isAlnum(text[j]) || text[j] == '_');
    };
    if (text[i] == 'T' && !(i > 0 && word(i - 1)) && !word(i + 1)) {
      out += storage.str();
      continue;
    }
    out += text[i];
  }
  return out;
}

/// One `type name` or `type *name` of a parameter list.
KernelParam parseParam(llvm::StringRef text) {
  KernelParam p;
  text = text.trim();
  size_t split = text.find_last_of(" *");
  p.name = text.substr(split + 1).str();
  llvm::StringRef type = text.substr(0, split + 1).trim();
  p.pointer = type.ends_with("*");
  if (p.pointer) {
    llvm::StringRef pointee = type.drop_back().trim();
    pointee.consume_front("const ");
    p.pointee = pointee.trim().str();
    p.type = type.drop_back().trim().str() + " *";
  } else {
    p.type = type.str();
  }
  return p;
}

KernelSignature parseSignature(const Entry &e, llvm::StringRef suffix,
                               llvm::StringRef storage) {
  KernelSignature s;
  s.function = ("otcrt_" + llvm::StringRef(e.name) + suffix).str();
  s.result = e.result;
  std::string params = resolveT(e.params, storage);
  llvm::StringRef list = llvm::StringRef(params).trim();
  list.consume_front("(");
  list.consume_back(")");
  if (list.trim() == "void")
    return s;
  llvm::SmallVector<llvm::StringRef> parts;
  list.split(parts, ',');
  for (llvm::StringRef part : parts)
    s.params.push_back(parseParam(part));
  return s;
}

std::vector<KernelSignature> buildSignatures() {
  std::vector<KernelSignature> all;
  for (const Entry &e : kEntries) {
    if (!e.typed) {
      all.push_back(parseSignature(e, "", ""));
      continue;
    }
    all.push_back(parseSignature(e, "_f32", "float"));
    all.push_back(parseSignature(e, "_bf16", "otcrt_bf16"));
  }
  return all;
}

/// The range of an integer parameter's type, or nullopt for a type that is
/// not an integer.
std::optional<std::pair<int64_t, int64_t>> integerRange(llvm::StringRef type) {
  if (type == "int64_t")
    return std::pair{std::numeric_limits<int64_t>::min(),
                     std::numeric_limits<int64_t>::max()};
  if (type == "int32_t" || type == "int")
    return std::pair<int64_t, int64_t>{std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max()};
  if (type == "uint64_t")
    return std::pair<int64_t, int64_t>{0, std::numeric_limits<int64_t>::max()};
  return std::nullopt;
}

std::string describe(const KernelArg &a) {
  switch (a.kind) {
  case KernelArg::Integer:
    return "the integer " + std::to_string(a.value);
  case KernelArg::Float:
    return "a float";
  case KernelArg::Null:
    return "a null pointer";
  case KernelArg::Pointer:
    return "a pointer to " + a.pointee;
  }
  return "";
}

/// Whether `a` may bind to `p`.
bool fits(const KernelArg &a, const KernelParam &p) {
  switch (a.kind) {
  case KernelArg::Integer: {
    auto range = integerRange(p.type);
    return !p.pointer && range && a.value >= range->first &&
           a.value <= range->second;
  }
  case KernelArg::Float:
    return !p.pointer && (p.type == "float" || p.type == "double");
  case KernelArg::Null:
    return p.pointer;
  case KernelArg::Pointer:
    return p.pointer && (p.pointee == "void" || p.pointee == a.pointee);
  }
  return false;
}

} // namespace

llvm::ArrayRef<KernelSignature> otc::kernelSignatures() {
  static const std::vector<KernelSignature> all = buildSignatures();
  return all;
}

const KernelSignature *otc::lookupKernelSignature(llvm::StringRef function) {
  static const llvm::StringMap<const KernelSignature *> byName = [] {
    llvm::StringMap<const KernelSignature *> m;
    for (const KernelSignature &s : kernelSignatures())
      m[s.function] = &s;
    return m;
  }();
  auto it = byName.find(function);
  return it == byName.end() ? nullptr : it->second;
}

std::string otc::checkKernelCall(llvm::StringRef function,
                                 llvm::ArrayRef<KernelArg> args) {
  const KernelSignature *s = lookupKernelSignature(function);
  if (!s)
    return (function + " is not a function of the kernel library "
                       "(otcrt/kernels.def)")
        .str();
  if (args.size() != s->params.size())
    return (function + " takes " + llvm::Twine(s->params.size()) +
            " arguments (otcrt/kernels.def), the call passes " +
            llvm::Twine(args.size()))
        .str();
  for (auto [i, a, p] : llvm::enumerate(args, s->params))
    if (!fits(a, p))
      return (function + ": argument " + llvm::Twine(i + 1) + " (" + p.type +
              (p.pointer ? "" : " ") + p.name + ", otcrt/kernels.def) is " +
              describe(a))
          .str();
  return "";
}
