//===- ErrorLine.h - one line for an error diagnostic of the tools --------===//
//
// The tools print the first error of a compile or run as one line: where it
// happened (the ONNX node, value or graph name, else file:line:col) and what
// happened, with the line breaks that names from a model may hold turned
// into spaces.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_ERRORLINE_H
#define OTC_TOOLS_ERRORLINE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace otc {

/// "WHERE: MESSAGE" for `diag`, on one line; the first location of a fused
/// one names it.
inline std::string errorLine(mlir::Diagnostic &diag) {
  mlir::Location loc = diag.getLocation();
  while (auto fused = llvm::dyn_cast<mlir::FusedLoc>(loc)) {
    if (fused.getLocations().empty())
      break;
    loc = fused.getLocations().front();
  }
  std::string where;
  llvm::raw_string_ostream os(where);
  if (auto name = llvm::dyn_cast<mlir::NameLoc>(loc))
    os << name.getName().getValue();
  else if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else
    loc.print(os);
  std::string line = os.str() + ": " + diag.str();
  for (char &c : line)
    if (c == '\n' || c == '\r')
      c = ' ';
  return line;
}

} // namespace otc

#endif // OTC_TOOLS_ERRORLINE_H
