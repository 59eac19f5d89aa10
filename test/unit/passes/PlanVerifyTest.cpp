//===- PlanVerifyTest.cpp - unit test of the buffer-plan verifier ---------===//
//
// Checks otc::verifyBufferPlan on hand-placed plans: two temporaries that
// are live together may not share bytes (a 64-byte buffer at 0 and one at 32
// overlap; at 64 they meet and do not), buffers whose live ranges are
// disjoint may share them, buffers of one slot share one place, and two
// slots, live throughout, may not overlap.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {

/// A function writing buffers a then b and reading both at once (`together`)
/// or writing a, reading it, then writing b (`apart`), with a at offset 0
/// and b at `offsetB`; each 4x4xf32 = 64 bytes.
std::string plan(int offsetB, bool together, const char *slotA = nullptr,
                 const char *slotB = nullptr) {
  auto buffer = [](const char *name, int offset, const char *slot) {
    std::string attrs = "offset = " + std::to_string(offset) + " : i64";
    if (slot)
      attrs += ", slot = \"" + std::string(slot) + "\"";
    return std::string("    %") + name + " = otck.buffer {" + attrs +
           "} : memref<4x4xf32>\n";
  };
  auto write = [](const char *name) {
    return std::string("    otck.kernel outs(%") + name +
           " : memref<4x4xf32>) {\n"
           "      %c = otc.constant dense<1.0> : tensor<4x4xf32>\n"
           "      otck.yield %c : tensor<4x4xf32>\n    }\n";
  };
  auto read = [](const std::string &names) {
    std::string list, types, args;
    for (size_t i = 0; i < names.size(); ++i) {
      std::string sep = i ? ", " : "";
      list += sep + "%" + names[i];
      types += sep + "memref<4x4xf32>";
      args += sep + "%x" + std::to_string(i) + ": tensor<4x4xf32>";
    }
    return "    otck.kernel ins(" + list + " : " + types +
           ") outs(%out : memref<4x4xf32>) {\n    ^bb0(" + args +
           "):\n      otck.yield %x0 : tensor<4x4xf32>\n    }\n";
  };
  std::string body = "module attributes {otck.arena_size = 1024 : i64} {\n"
                     "  func.func @f() {\n" +
                     buffer("out", 512, "result") + buffer("a", 0, slotA) +
                     buffer("b", offsetB, slotB);
  if (together)
    body += write("a") + write("b") + read("ab");
  else
    body += write("a") + read("a") + write("b") + read("b");
  return body + "    return\n  }\n}\n";
}

/// Whether the plan verifies (its diagnostics swallowed).
bool verifies(const std::string &text) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<otc::OtcDialect, otc::otck::OtckDialect,
                  mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module) << text;
  if (!module)
    return false;
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  return mlir::succeeded(otc::verifyBufferPlan(*module));
}

TEST(PlanVerify, TemporariesLiveTogether) {
  EXPECT_FALSE(verifies(plan(32, true)));
  EXPECT_FALSE(verifies(plan(0, true)));
  EXPECT_TRUE(verifies(plan(64, true)));
  EXPECT_TRUE(verifies(plan(128, true)));
}

TEST(PlanVerify, TemporariesLiveApart) {
  EXPECT_TRUE(verifies(plan(0, false)));
  EXPECT_TRUE(verifies(plan(32, false)));
}

TEST(PlanVerify, Slots) {
  // One slot, two buffers: one place.
  EXPECT_TRUE(verifies(plan(0, false, "param:w", "param:w")));
  // Two slots live throughout, even where the function uses them apart.
  EXPECT_FALSE(verifies(plan(32, false, "param:w", "param:v")));
  EXPECT_TRUE(verifies(plan(64, false, "param:w", "param:v")));
  // A slot and a temporary live together.
  EXPECT_FALSE(verifies(plan(32, true, "param:w")));
}

} // namespace
