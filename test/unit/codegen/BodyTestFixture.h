//===- BodyTestFixture.h - fixture of the kernel-body unit tests -*- C++ -*-===//
//
// What the kernel-body unit tests share: a gtest fixture that parses a
// textual module, finds an op by its NameLoc, emits its body with emitBody
// (operands in0, in1, ..., results out0, out1, ...) and counts its work
// items, and the EXPECT_HAS / EXPECT_LACKS substring checks.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_UNITTESTS_BODYTESTFIXTURE_H
#define OTC_CODEGEN_UNITTESTS_BODYTESTFIXTURE_H

#include "codegen/KernelBodies.h"
#include "codegen/Target.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace otc::testing {

/// Parses `moduleText` once per test; bodies are looked up by location.
class BodyTest : public ::testing::Test {
protected:
  explicit BodyTest(const char *moduleText) : text(moduleText) {}

  void SetUp() override {
    ctx.loadDialect<otc::OtcDialect, mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    ASSERT_TRUE(module) << "the test module does not parse";
  }

  /// The op located at `name`.
  mlir::Operation *find(llvm::StringRef name) {
    mlir::Operation *found = nullptr;
    module->walk([&](mlir::Operation *op) {
      if (auto loc = llvm::dyn_cast<mlir::NameLoc>(op->getLoc()))
        if (loc.getName() == name)
          found = op;
    });
    EXPECT_TRUE(found) << name.str();
    return found;
  }

  /// The body of the op at `name` with operands in0, in1, ... and results
  /// out0, out1, ...; empty when emission fails.
  std::string body(llvm::StringRef name, bool cuda = false) {
    mlir::Operation *op = find(name);
    if (!op)
      return "";
    llvm::SmallVector<std::string> in, out;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      in.push_back("in" + std::to_string(i));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      out.push_back("out" + std::to_string(i));
    std::string bodyText, globals;
    llvm::raw_string_ostream os(bodyText), gos(globals);
    otc::BodyContext c{os, gos, in, out, "k0",
                       *otc::lookupTarget(cuda ? "cuda" : "cpu")};
    if (mlir::failed(otc::emitBody(op, c)))
      return "";
    return bodyText;
  }

  int64_t items(llvm::StringRef name) { return otc::workItems(find(name)); }

  const char *text;
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

} // namespace otc::testing

#define EXPECT_HAS(text, line)                                                 \
  EXPECT_NE((text).find(line), std::string::npos)                              \
      << "missing: " << (line) << "\nin:\n"                                    \
      << (text)
#define EXPECT_LACKS(text, line)                                               \
  EXPECT_EQ((text).find(line), std::string::npos)                              \
      << "unexpected: " << (line) << "\nin:\n"                                 \
      << (text)

#endif // OTC_CODEGEN_UNITTESTS_BODYTESTFIXTURE_H
