//===- BufferPlanTest.cpp - the planned-buffer verifier -------------------===//
//
// Unit tests of otc::verifyBufferPlan on hand-made plans (the pass always
// plans before it verifies, so only a plan written by hand reaches the
// verifier with bad offsets): a buffer at a negative offset and one that
// ends past the arena are rejected, one that fits is accepted.
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

/// verifyBufferPlan's verdict on one 64-byte buffer at `offset` of a
/// 1024-byte arena, and the first diagnostic.
bool verifyOffset(int64_t offset, std::string &message) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<otc::OtcDialect, otc::otck::OtckDialect,
                  mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return mlir::success();
  });
  std::string text =
      "module attributes {otck.arena_size = 1024 : i64} {\n"
      "  func.func @f() {\n"
      "    %t = otck.buffer {offset = " + std::to_string(offset) +
      " : i64} : memref<4x4xf32>\n"
      "    otck.kernel outs(%t : memref<4x4xf32>) {\n"
      "      %c = otc.constant dense<1.0> : tensor<4x4xf32>\n"
      "      otck.yield %c : tensor<4x4xf32>\n"
      "    }\n"
      "    return\n"
      "  }\n"
      "}\n";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module) << "the test module does not parse";
  return module && mlir::succeeded(otc::verifyBufferPlan(*module));
}

TEST(BufferPlan, RejectsANegativeOffset) {
  std::string message;
  EXPECT_FALSE(verifyOffset(-64, message));
  EXPECT_EQ(message, "buffer lies outside the arena");
}

TEST(BufferPlan, RejectsABufferEndingPastTheArena) {
  std::string message;
  EXPECT_FALSE(verifyOffset(1000, message));
  EXPECT_EQ(message, "buffer lies outside the arena");
}

TEST(BufferPlan, AcceptsABufferInside) {
  std::string message;
  EXPECT_TRUE(verifyOffset(960, message)) << message;
}

} // namespace
