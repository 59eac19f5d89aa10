//===- ScalarExprTest.cpp - unit test of scalar expressions ---------------===//
//
// Tests ir/ScalarExpr.h and codegen/ScalarExprPrinter.h: the C text of
// expressions built by hand (parentheses that keep the tree's grouping,
// float/double functions and literals, comparisons as values and as
// conditions, casts, integer powers, subexpressions used twice bound once),
// that every elementwise op but adamw has a scalar expression, and the
// composition of two ops' expressions into one, e.g. gelu(x + b), as the
// fusion of an elementwise chain builds it.
//
//===----------------------------------------------------------------------===//

#include "codegen/ScalarExprPrinter.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using otc::ScalarExpr;

namespace {

using Fn = ScalarExpr::UnaryFn;
using Op = ScalarExpr::BinaryOp;
using Pred = ScalarExpr::Predicate;

class ScalarExprs : public ::testing::Test {
protected:
  ScalarExprs() {
    ctx.loadDialect<otc::OtcDialect, func::FuncDialect>();
    f32 = Float32Type::get(&ctx);
    f64 = Float64Type::get(&ctx);
    bf16 = BFloat16Type::get(&ctx);
    i64 = IntegerType::get(&ctx, 64);
    i1 = IntegerType::get(&ctx, 1);
  }

  /// The bindings and the expression of `e` over operands a, b, c, d.
  std::string print(const ScalarExpr &e,
                    llvm::ArrayRef<std::string> names = {"a", "b", "c",
                                                         "d"}) {
    std::string bindings;
    llvm::raw_string_ostream os(bindings);
    std::string value = otc::printScalarExpr(os, e, names, "");
    return bindings + value;
  }

  /// The op of a parsed module located at `name`.
  Operation *find(ModuleOp module, StringRef name) {
    Operation *found = nullptr;
    module.walk([&](Operation *op) {
      if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
        if (loc.getName() == name)
          found = op;
    });
    EXPECT_TRUE(found) << name.str();
    return found;
  }

  /// The scalar expression of the op at `name`.
  ScalarExpr expressionOf(ModuleOp module, StringRef name) {
    auto op = dyn_cast_or_null<otc::ScalarExpressionOpInterface>(
        find(module, name));
    EXPECT_TRUE(op) << name.str() << " has no scalar expression";
    return op ? op.getScalarExpression() : ScalarExpr();
  }

  MLIRContext ctx;
  Type f32, f64, bf16, i64, i1;
};

TEST_F(ScalarExprs, ParenthesesKeepTheTree) {
  ScalarExpr a = ScalarExpr::operand(0, f32), b = ScalarExpr::operand(1, f32),
             c = ScalarExpr::operand(2, f32);
  EXPECT_EQ(print(a - b - c), "a - b - c");
  EXPECT_EQ(print(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(print(a * (b * c)), "a * (b * c)");
  EXPECT_EQ(print(a * b + c), "a * b + c");
  EXPECT_EQ(print((a + b) * c), "(a + b) * c");
  EXPECT_EQ(print(a / (b * c)), "a / (b * c)");
  EXPECT_EQ(print(-(a + b)), "-(a + b)");
  EXPECT_EQ(print(-(-a)), "-(-a)");
  EXPECT_EQ(print(-ScalarExpr::constant(-2.0, f32)), "-(-2.000000000e+00f)");
  EXPECT_EQ(print(ScalarExpr::constant(-0.5, f32) * a),
            "-5.000000000e-01f * a");
  EXPECT_EQ(print(ScalarExpr::cast(a + b, f64)), "(double)(a + b)");
}

TEST_F(ScalarExprs, FunctionsAndLiteralsFollowTheType) {
  ScalarExpr x = ScalarExpr::operand(0, f32), y = ScalarExpr::operand(0, f64),
             h = ScalarExpr::operand(0, bf16);
  auto sigmoid = [](ScalarExpr v, Type t) {
    ScalarExpr one = ScalarExpr::constant(1.0, t);
    return one / (one + ScalarExpr::unary(Fn::Exp, -v));
  };
  EXPECT_EQ(print(sigmoid(x, f32), {"x"}), "1.0f / (1.0f + expf(-x))");
  EXPECT_EQ(print(sigmoid(y, f64), {"x"}), "1.0 / (1.0 + exp(-x))");
  // BF16 computes in float.
  EXPECT_EQ(print(ScalarExpr::unary(Fn::Erf, h), {"x"}), "erff(x)");
  EXPECT_EQ(print(ScalarExpr::unary(Fn::Abs, y), {"x"}), "fabs(x)");
  EXPECT_EQ(print(ScalarExpr::unary(Fn::Cos, x), {"x"}), "cosf(x)");
  EXPECT_EQ(print(ScalarExpr::unary(Fn::Sin, y), {"x"}), "sin(x)");
  EXPECT_EQ(print(ScalarExpr::binary(Op::Max, x, x), {"x"}), "fmaxf(x, x)");
  EXPECT_EQ(print(ScalarExpr::binary(Op::Pow, x, x), {"x"}), "powf(x, x)");
  EXPECT_EQ(print(y * ScalarExpr::constant(0.1, f64), {"x"}),
            "x * 1.000000000e-01");
  // An f32 constant in an f64 expression stays a float literal.
  EXPECT_EQ(print(y * ScalarExpr::constant(0.1, f32), {"x"}),
            "x * 1.000000000e-01f");
}

TEST_F(ScalarExprs, ComparisonsSelectsAndCasts) {
  ScalarExpr a = ScalarExpr::operand(0, f32), b = ScalarExpr::operand(1, f32);
  ScalarExpr zero = ScalarExpr::constant(0.0, f32);
  ScalarExpr lt = ScalarExpr::compare(Pred::Lt, a, b);
  // A value is the uint8_t 0 or 1; a condition is the bare test.
  EXPECT_EQ(print(lt), "(uint8_t)(a < b)");
  EXPECT_EQ(print(ScalarExpr::select(lt, a, zero)), "a < b ? a : 0.0f");
  EXPECT_EQ(print(ScalarExpr::select(
                ScalarExpr::compare(Pred::Eq, a - b, zero), a, b)),
            "a - b == 0.0f ? a : b");
  EXPECT_EQ(print(ScalarExpr::select(lt, a, b) + b), "(a < b ? a : b) + b");
  EXPECT_EQ(print(ScalarExpr::cast(a + b, i1)), "(uint8_t)(a + b != 0)");
  EXPECT_EQ(print(ScalarExpr::cast(a, bf16)), "(otc_bf16)a");
  EXPECT_EQ(print(ScalarExpr::cast(ScalarExpr::cast(a, bf16), f32) * b),
            "(float)(otc_bf16)a * b");
}

TEST_F(ScalarExprs, IntegerArithmetic) {
  ScalarExpr a = ScalarExpr::operand(0, i64), b = ScalarExpr::operand(1, i64);
  EXPECT_EQ(print(ScalarExpr::binary(Op::Pow, a, b)),
            "(int64_t)pow((double)a, (double)b)");
  EXPECT_EQ(print(a + ScalarExpr::constant(3, i64)), "a + (int64_t)3");
  // Integer max reads its arguments twice: a sum is computed once.
  EXPECT_EQ(print(ScalarExpr::binary(Op::Max, a + b, b)),
            "const int64_t t0 = a + b;\nt0 > b ? t0 : b");
}

TEST_F(ScalarExprs, SharedNodesAreBoundOnce) {
  ScalarExpr x = ScalarExpr::operand(0, f32);
  ScalarExpr e = ScalarExpr::unary(Fn::Exp, x);
  EXPECT_EQ(print(e * e + e, {"x"}), "const float t0 = expf(x);\nt0 * t0 + t0");
  // Equal but distinct nodes are printed twice.
  EXPECT_EQ(print(e * ScalarExpr::unary(Fn::Exp, x), {"x"}),
            "expf(x) * expf(x)");
  EXPECT_EQ((e * e).getNumOperands(), 1u);
}

TEST_F(ScalarExprs, EveryElementwiseOpButAdamwHasOne) {
  unsigned count = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "otc")
      continue;
    bool elementwise = name.hasTrait<OpTrait::OtcElementwise>();
    bool scalar = name.hasInterface<otc::ScalarExpressionOpInterface>();
    count += scalar;
    if (name.getStringRef() == "otc.adamw")
      EXPECT_FALSE(scalar);
    else
      EXPECT_EQ(elementwise, scalar) << name.getStringRef().str();
  }
  EXPECT_EQ(count, 26u);
}

constexpr const char kModule[] = R"mlir(
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %m: tensor<4x8xi1>,
             %d: tensor<4x8xf64>, %n: tensor<3xi64>) {
  %h = otc.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("add")
  %g = otc.gelu %h : tensor<4x8xf32> loc("gelu")
  %s = otc.sub %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("sub")
  %dg = otc.dropout_grad %d, %m {ratio = 0.1 : f64} : (tensor<4x8xf64>, tensor<4x8xi1>) -> tensor<4x8xf64> loc("dropout_grad")
  %gd = otc.gelu %d : tensor<4x8xf64> loc("gelu_f64")
  %r = otc.relu %x : tensor<4x8xf32> loc("relu")
  %p = otc.pow %n, %n : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64> loc("pow")
  %c = otc.cast %x : (tensor<4x8xf32>) -> tensor<4x8xi1> loc("cast")
  return
}
)mlir";

TEST_F(ScalarExprs, OpExpressions) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);
  EXPECT_EQ(print(expressionOf(*module, "relu"), {"x"}), "x > 0.0f ? x : 0.0f");
  EXPECT_EQ(print(expressionOf(*module, "pow")),
            "(int64_t)pow((double)a, (double)b)");
  EXPECT_EQ(print(expressionOf(*module, "cast"), {"x"}), "(uint8_t)(x != 0)");
  // The scale is a float constant whatever the element type.
  EXPECT_EQ(print(expressionOf(*module, "dropout_grad")),
            "b ? a * 1.111111111e+00f : 0.0f");
  // GELU computes in float: an f64 operand narrows, the result widens.
  EXPECT_EQ(print(expressionOf(*module, "gelu_f64"), {"x"}),
            "const float t0 = (float)x;\n"
            "(double)(t0 * (5.000000000e-01f * (1.0f + erff(t0 * "
            "7.071067812e-01f))))");
}

TEST_F(ScalarExprs, ComposeGeluOfAdd) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);
  ScalarExpr add = expressionOf(*module, "add");
  ScalarExpr gelu = expressionOf(*module, "gelu");
  // gelu(x + b): the fused op reads (x, b); the sum is computed once.
  ScalarExpr fused = otc::composeOperand(gelu, 0, add, 2);
  EXPECT_EQ(fused.getNumOperands(), 2u);
  EXPECT_EQ(print(fused, {"x", "b"}),
            "const float t0 = x + b;\n"
            "t0 * (5.000000000e-01f * (1.0f + erff(t0 * 7.071067812e-01f)))");
  // The producer spliced in at operand 1 of sub: (h, x) becomes
  // (h, x, b) for h - (x + b), and operands after the slot move up.
  ScalarExpr sub = expressionOf(*module, "sub");
  EXPECT_EQ(print(otc::composeOperand(sub, 1, add, 2)), "a - (b + c)");
  // A chain: (x + b) - x fed into gelu, then the add fed into the sub.
  ScalarExpr chain =
      otc::composeOperand(otc::composeOperand(gelu, 0, sub, 2), 0, add, 2);
  EXPECT_EQ(chain.getNumOperands(), 3u);
  EXPECT_EQ(print(chain, {"x", "b", "y"}),
            "const float t0 = x + b - y;\n"
            "t0 * (5.000000000e-01f * (1.0f + erff(t0 * 7.071067812e-01f)))");
}

TEST_F(ScalarExprs, SubstituteKeepsSharing) {
  ScalarExpr a = ScalarExpr::operand(0, f32), b = ScalarExpr::operand(1, f32);
  ScalarExpr x = ScalarExpr::operand(0, f32);
  ScalarExpr e = ScalarExpr::unary(Fn::Exp, x);
  // Both operands of a * b read one producer: its value is computed once.
  ScalarExpr sq = otc::substituteOperands(a * b, {e, e});
  EXPECT_EQ(print(sq, {"x"}), "const float t0 = expf(x);\nt0 * t0");
  // The original is unchanged.
  EXPECT_EQ(print(a * b), "a * b");
}

} // namespace
