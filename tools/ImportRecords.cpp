//===- ImportRecords.cpp - what otc-compile's import recorded -------------===//
//
// See ImportRecords.h.
//
//===----------------------------------------------------------------------===//

#include "tools/ImportRecords.h"

#include "frontend/OnnxImporter.h"
#include "ir/NameRegex.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

using namespace mlir;

otc::ImportRecords otc::readImportRecords(ModuleOp module,
                                          const std::string &freeze,
                                          std::optional<int64_t> microBatch) {
  ImportRecords records;
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward")) {
    auto collect = [&](const char *attr, auto &out) {
      if (auto d = fwd->getAttrOfType<DictionaryAttr>(attr))
        for (NamedAttribute a : d)
          if (auto why = dyn_cast<StringAttr>(a.getValue()))
            out.emplace_back(a.getName().str(), why.str());
    };
    collect(attrs::kUntrained, records.untrained);
    collect(attrs::kTied, records.tied);
    collect(attrs::kSplit, records.split);
    collect(attrs::kRemoved, records.removed);
  }
  // Said once: the model trained is not the one exported from PyTorch.
  if (!records.removed.empty()) {
    std::string names;
    for (size_t i = 0; i < records.removed.size() && i < 3; ++i)
      names += (i ? ", " : "") + records.removed[i].first;
    llvm::errs() << "otc-compile: warning: the exporter removed "
                 << records.removed.size() << " parameter(s) of the model ("
                 << names << (records.removed.size() > 3 ? ", ..." : "")
                 << ": zero-initialized biases whose addition its optimizer "
                    "dropped), which are not trained; export with "
                    "torch.onnx.export(..., optimize=False) to keep them\n";
  }
  // And where the values could not decide a tie (a sizing file's zeros),
  // or whether a folded value is a parameter.
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward")) {
    // A folded value --freeze names is decided.
    std::string regexError;
    std::unique_ptr<NameRegex> frozen =
        freeze.empty() ? nullptr : NameRegex::compile(freeze, regexError);
    // Differentiate freezes such a value by either name.
    auto frozenParam = [&](StringRef name) {
      if (!frozen)
        return false;
      if (frozen->matches(name.str()))
        return true;
      for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
        if (auto p = fwd.getArgAttrOfType<StringAttr>(i, attrs::kParam);
            p && p.getValue() == name)
          if (auto of = fwd.getArgAttrOfType<StringAttr>(i, attrs::kParamOf))
            return frozen->matches(of.str());
      return false;
    };
    for (const char *kind : {attrs::kUndecidedTies, attrs::kUndecidedParams})
      if (auto d = fwd->getAttrOfType<DictionaryAttr>(kind))
        for (NamedAttribute a : d)
          if (auto why = dyn_cast<StringAttr>(a.getValue());
              why && !(kind == attrs::kUndecidedParams &&
                       frozenParam(a.getName().getValue())))
            llvm::errs() << "otc-compile: warning: '" << a.getName().getValue()
                         << "' " << why.getValue() << "\n";
  }
  // Said once too: a parameter the exporter folded through a lookup is not
  // trained (its table is no longer in the graph).
  for (const auto &[name, why] : records.untrained)
    if (llvm::StringRef(why).starts_with(kFoldedLookupReason))
      llvm::errs() << "otc-compile: warning: '" << name << "' is " << why
                   << "\n";
  if (auto f = module->getAttrOfType<IntegerAttr>(attrs::kReboundBatch))
    llvm::errs() << "otc-compile: note: the export fixed the batch at "
                 << f.getInt() << "; --micro-batch " << microBatch.value_or(0)
                 << " re-binds it (every shape follows)\n";
  return records;
}
