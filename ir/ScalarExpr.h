//===- ScalarExpr.h - scalar computations of elementwise ops ----*- C++ -*-===//
//
// What an elementwise op computes for one element, as a small immutable
// expression graph over its operands' elements: operand k, a constant, a unary
// function, a binary arithmetic operation, a comparison, a select and a
// conversion to an element type. Ops return theirs through
// ScalarExpressionOpInterface (ir/OtcScalarExpressions.cpp); emitters print
// it (codegen/ScalarExprPrinter.h) and fusion composes the expressions of a
// chain of ops into one (substituteOperands, composeOperand) instead of
// concatenating statements.
//
// Every node has an element type: f32 and bf16 values are computed in float
// (bf16 only rounds when stored or converted to bf16), f64 in double,
// integers in their own width, and i1 values are 0 or 1. Nodes are shared,
// not copied, so an expression is a DAG: a subexpression used twice (the
// sigmoid in silu's gradient) is one node, which a printer evaluates once.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_SCALAREXPR_H
#define OTC_IR_SCALAREXPR_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <vector>

namespace otc {

/// A handle to an immutable node of a scalar expression; copies share the
/// node. A default-constructed handle is null.
class ScalarExpr {
public:
  enum class Kind { Operand, Constant, Unary, Binary, Compare, Select, Cast };
  /// Functions of one argument; Neg is -x.
  enum class UnaryFn { Neg, Exp, Log, Tanh, Sqrt, Erf, Abs, Cos, Sin };
  enum class BinaryOp { Add, Sub, Mul, Div, Pow, Max, Min };
  enum class Predicate { Eq, Ne, Lt, Le, Gt, Ge };

  ScalarExpr() = default;

  //===--------------------------------------------------------------------===//
  // Builders
  //===--------------------------------------------------------------------===//

  /// Element i of operand `index` (broadcast), of element type `type`.
  static ScalarExpr operand(unsigned index, mlir::Type type);
  /// The constant `value` in element type `type` (which decides its
  /// precision: an f32 constant in an f64 expression is rounded to float).
  static ScalarExpr constant(double value, mlir::Type type);
  /// `fn(x)`, of x's type.
  static ScalarExpr unary(UnaryFn fn, ScalarExpr x);
  /// `lhs op rhs`, of lhs's type.
  static ScalarExpr binary(BinaryOp op, ScalarExpr lhs, ScalarExpr rhs);
  /// `lhs pred rhs`, of type i1.
  static ScalarExpr compare(Predicate pred, ScalarExpr lhs, ScalarExpr rhs);
  /// `cond ? lhs : rhs` (cond of type i1), of lhs's type.
  static ScalarExpr select(ScalarExpr cond, ScalarExpr lhs, ScalarExpr rhs);
  /// `x` converted to `type`: floats to integers truncate toward zero,
  /// anything to i1 is `x != 0`, to bf16 rounds to nearest even.
  static ScalarExpr cast(ScalarExpr x, mlir::Type type);

  //===--------------------------------------------------------------------===//
  // Accessors
  //===--------------------------------------------------------------------===//

  explicit operator bool() const { return node != nullptr; }
  Kind getKind() const { return node->kind; }
  mlir::Type getType() const { return node->type; }
  /// The operands of this node (Unary 1, Binary and Compare 2, Select 3).
  llvm::ArrayRef<ScalarExpr> getArgs() const { return node->args; }
  ScalarExpr getArg(unsigned k) const { return node->args[k]; }
  /// Operand: its index.
  unsigned getOperandIndex() const { return node->operandIndex; }
  /// Constant: its value.
  double getValue() const { return node->value; }
  UnaryFn getUnaryFn() const { return node->unaryFn; }
  BinaryOp getBinaryOp() const { return node->binaryOp; }
  Predicate getPredicate() const { return node->predicate; }

  /// The identity of the node (equal for copies of one handle).
  const void *getNode() const { return node.get(); }
  bool isSameNode(const ScalarExpr &other) const { return node == other.node; }

  /// One more than the highest operand index referenced (0 for none).
  unsigned getNumOperands() const;

private:
  struct Node {
    Kind kind = Kind::Constant;
    mlir::Type type;
    std::vector<ScalarExpr> args;
    unsigned operandIndex = 0;
    double value = 0.0;
    UnaryFn unaryFn = UnaryFn::Neg;
    BinaryOp binaryOp = BinaryOp::Add;
    Predicate predicate = Predicate::Eq;
  };
  explicit ScalarExpr(std::shared_ptr<const Node> node)
      : node(std::move(node)) {}
  static ScalarExpr make(Node n);

  std::shared_ptr<const Node> node;
};

/// Arithmetic on expressions of one type: the tree of `a + b * c` is the
/// tree C builds for it, so operation order is the order written.
ScalarExpr operator+(ScalarExpr lhs, ScalarExpr rhs);
ScalarExpr operator-(ScalarExpr lhs, ScalarExpr rhs);
ScalarExpr operator*(ScalarExpr lhs, ScalarExpr rhs);
ScalarExpr operator/(ScalarExpr lhs, ScalarExpr rhs);
ScalarExpr operator-(ScalarExpr x);

/// `e` with operand k replaced by `values[k]` everywhere (each value must
/// have the operand's type; every referenced operand needs a value). Shared
/// nodes stay shared, and a value used by several operand nodes is one node.
ScalarExpr substituteOperands(const ScalarExpr &e,
                              llvm::ArrayRef<ScalarExpr> values);

/// The expression of `outer` applied to `inner` at operand `slot`: the
/// result's operands are outer's operands before `slot`, then inner's
/// `innerOperands` operands, then outer's operands after `slot`. This is the
/// expression of the fused op whose operand list is the consumer's with the
/// producer's operands spliced in at `slot`.
ScalarExpr composeOperand(const ScalarExpr &outer, unsigned slot,
                          const ScalarExpr &inner, unsigned innerOperands);

} // namespace otc

#endif // OTC_IR_SCALAREXPR_H
