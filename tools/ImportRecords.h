//===- ImportRecords.h - what otc-compile's import recorded -----*- C++ -*-===//
//
// What the import recorded on @forward about the initializers (not trained,
// tied, split, removed by the exporter), kept for the reports, and the
// warnings it gives once each: what makes the model trained differ from the
// one exported.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_IMPORTRECORDS_H
#define OTC_TOOLS_IMPORTRECORDS_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace otc {

/// (initializer or parameter name, why) pairs, as plan.json lists them.
struct ImportRecords {
  std::vector<std::pair<std::string, std::string>> untrained, tied, split,
      removed;
};

/// Reads `module`'s records and prints, on stderr, one line each: the
/// parameters the exporter removed, the ties and folded values the values
/// could not decide (but a folded value that `freeze`, --freeze's pattern,
/// matches by either of its names), the parameters folded through a lookup,
/// and a fixed batch that `microBatch` (--micro-batch) re-binds.
ImportRecords readImportRecords(mlir::ModuleOp module,
                                const std::string &freeze,
                                std::optional<int64_t> microBatch);

} // namespace otc

#endif // OTC_TOOLS_IMPORTRECORDS_H
