//===- ScalarExprPrinter.h - scalar expressions as C ------------*- C++ -*-===//
//
// Prints a ScalarExpr (ir/ScalarExpr.h) as a C expression over named locals,
// the text that both the host compiler and nvcc accept: `expf` and friends
// for float (f32 and bf16) values, `exp` for f64, literals in the precision
// of their type, parentheses exactly where C's precedence would otherwise
// regroup the tree (so operation order is the tree's), and each
// subexpression used more than once bound to a local first. Used by the
// elementwise kernel bodies; private to codegen/ and its tests.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_SCALAREXPRPRINTER_H
#define OTC_CODEGEN_SCALAREXPRPRINTER_H

#include "ir/ScalarExpr.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace otc {

/// Prints `e` with operand k read from the C local `operandNames[k]`.
/// Subexpressions used more than once are bound to locals named
/// `<tempPrefix>0`, `<tempPrefix>1`, ... by statements written to `os`, one
/// per line after `indent`; the returned string is the C expression of `e`
/// itself, valid after those statements.
std::string printScalarExpr(llvm::raw_ostream &os, const ScalarExpr &e,
                            llvm::ArrayRef<std::string> operandNames,
                            llvm::StringRef indent = "    ",
                            llvm::StringRef tempPrefix = "t");

/// The C math function `name` ("exp") for values of element type `t`: `expf`
/// for f32 and bf16 (computed in float), `exp` for f64.
std::string mathFunction(llvm::StringRef name, mlir::Type t);

/// The literal `v` in element type `t`: `0.0f`/`1.0f` (`0.0`/`1.0` for f64)
/// for zero and one, else floatLiteral or literal of BodyUtils.h, and
/// `(int64_t)5` for integers.
std::string typedLiteral(double v, mlir::Type t);

/// The C type in which values of element type `t` are computed: `float` for
/// f32 and bf16, `double` for f64, the storage type for integers and i1.
std::string computeCType(mlir::Type t);

} // namespace otc

#endif // OTC_CODEGEN_SCALAREXPRPRINTER_H
