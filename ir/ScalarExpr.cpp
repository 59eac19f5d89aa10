//===- ScalarExpr.cpp - scalar computations of elementwise ops ------------===//
//
// The builders of ScalarExpr nodes and the substitution that composes the
// expressions of a producer and its consumer. Substitution memoizes by node,
// so the DAG shape of both expressions survives: a node shared in the
// consumer stays one node, and the producer's expression is inserted once
// however often the consumer reads that operand.
//
//===----------------------------------------------------------------------===//

#include "ir/ScalarExpr.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <cassert>
#include <functional>

using namespace mlir;
using namespace otc;

ScalarExpr ScalarExpr::make(Node n) {
  return ScalarExpr(std::make_shared<const Node>(std::move(n)));
}

ScalarExpr ScalarExpr::operand(unsigned index, Type type) {
  Node n;
  n.kind = Kind::Operand;
  n.type = type;
  n.operandIndex = index;
  return make(std::move(n));
}

ScalarExpr ScalarExpr::constant(double value, Type type) {
  Node n;
  n.kind = Kind::Constant;
  n.type = type;
  n.value = value;
  return make(std::move(n));
}

ScalarExpr ScalarExpr::unary(UnaryFn fn, ScalarExpr x) {
  assert(x && "null argument");
  Node n;
  n.kind = Kind::Unary;
  n.type = x.getType();
  n.unaryFn = fn;
  n.args = {std::move(x)};
  return make(std::move(n));
}

ScalarExpr ScalarExpr::binary(BinaryOp op, ScalarExpr lhs, ScalarExpr rhs) {
  assert(lhs && rhs && "null argument");
  Node n;
  n.kind = Kind::Binary;
  n.type = lhs.getType();
  n.binaryOp = op;
  n.args = {std::move(lhs), std::move(rhs)};
  return make(std::move(n));
}

ScalarExpr ScalarExpr::compare(Predicate pred, ScalarExpr lhs,
                               ScalarExpr rhs) {
  assert(lhs && rhs && "null argument");
  Node n;
  n.kind = Kind::Compare;
  n.type = IntegerType::get(lhs.getType().getContext(), 1);
  n.predicate = pred;
  n.args = {std::move(lhs), std::move(rhs)};
  return make(std::move(n));
}

ScalarExpr ScalarExpr::select(ScalarExpr cond, ScalarExpr lhs,
                              ScalarExpr rhs) {
  assert(cond && lhs && rhs && "null argument");
  assert(cond.getType().isInteger(1) && "the condition is not i1");
  Node n;
  n.kind = Kind::Select;
  n.type = lhs.getType();
  n.args = {std::move(cond), std::move(lhs), std::move(rhs)};
  return make(std::move(n));
}

ScalarExpr ScalarExpr::cast(ScalarExpr x, Type type) {
  assert(x && "null argument");
  Node n;
  n.kind = Kind::Cast;
  n.type = type;
  n.args = {std::move(x)};
  return make(std::move(n));
}

unsigned ScalarExpr::getNumOperands() const {
  llvm::DenseMap<const void *, unsigned> seen;
  std::function<unsigned(const ScalarExpr &)> walk =
      [&](const ScalarExpr &e) -> unsigned {
    auto it = seen.find(e.getNode());
    if (it != seen.end())
      return it->second;
    unsigned n = e.getKind() == Kind::Operand ? e.getOperandIndex() + 1 : 0;
    for (const ScalarExpr &a : e.getArgs())
      n = std::max(n, walk(a));
    seen[e.getNode()] = n;
    return n;
  };
  return walk(*this);
}

ScalarExpr otc::operator+(ScalarExpr lhs, ScalarExpr rhs) {
  return ScalarExpr::binary(ScalarExpr::BinaryOp::Add, lhs, rhs);
}
ScalarExpr otc::operator-(ScalarExpr lhs, ScalarExpr rhs) {
  return ScalarExpr::binary(ScalarExpr::BinaryOp::Sub, lhs, rhs);
}
ScalarExpr otc::operator*(ScalarExpr lhs, ScalarExpr rhs) {
  return ScalarExpr::binary(ScalarExpr::BinaryOp::Mul, lhs, rhs);
}
ScalarExpr otc::operator/(ScalarExpr lhs, ScalarExpr rhs) {
  return ScalarExpr::binary(ScalarExpr::BinaryOp::Div, lhs, rhs);
}
ScalarExpr otc::operator-(ScalarExpr x) {
  return ScalarExpr::unary(ScalarExpr::UnaryFn::Neg, x);
}

//===----------------------------------------------------------------------===//
// Substitution
//===----------------------------------------------------------------------===//

namespace {

/// Rebuilds an expression bottom-up with each operand node mapped by a
/// callback, memoized by node so that sharing is kept.
class Rewriter {
public:
  explicit Rewriter(llvm::function_ref<ScalarExpr(const ScalarExpr &)> leaf)
      : leaf(leaf) {}

  ScalarExpr rewrite(const ScalarExpr &e) {
    auto it = done.find(e.getNode());
    if (it != done.end())
      return it->second;
    ScalarExpr r = rebuild(e);
    done[e.getNode()] = r;
    return r;
  }

private:
  ScalarExpr rebuild(const ScalarExpr &e) {
    using Kind = ScalarExpr::Kind;
    switch (e.getKind()) {
    case Kind::Operand:
      return leaf(e);
    case Kind::Constant:
      return e;
    default:
      break;
    }
    llvm::SmallVector<ScalarExpr, 3> args;
    bool changed = false;
    for (const ScalarExpr &a : e.getArgs()) {
      args.push_back(rewrite(a));
      changed |= !args.back().isSameNode(a);
    }
    if (!changed)
      return e;
    switch (e.getKind()) {
    case Kind::Unary:
      return ScalarExpr::unary(e.getUnaryFn(), args[0]);
    case Kind::Binary:
      return ScalarExpr::binary(e.getBinaryOp(), args[0], args[1]);
    case Kind::Compare:
      return ScalarExpr::compare(e.getPredicate(), args[0], args[1]);
    case Kind::Select:
      return ScalarExpr::select(args[0], args[1], args[2]);
    case Kind::Cast:
      return ScalarExpr::cast(args[0], e.getType());
    case Kind::Operand:
    case Kind::Constant:
      break;
    }
    return e;
  }

  llvm::function_ref<ScalarExpr(const ScalarExpr &)> leaf;
  llvm::DenseMap<const void *, ScalarExpr> done;
};

} // namespace

ScalarExpr otc::substituteOperands(const ScalarExpr &e,
                                   llvm::ArrayRef<ScalarExpr> values) {
  auto lookup = [&](const ScalarExpr &op) {
    unsigned k = op.getOperandIndex();
    assert(k < values.size() && values[k] && "operand without a value");
    assert(values[k].getType() == op.getType() &&
           "substituted value of another type");
    return values[k];
  };
  return Rewriter(lookup).rewrite(e);
}

ScalarExpr otc::composeOperand(const ScalarExpr &outer, unsigned slot,
                               const ScalarExpr &inner,
                               unsigned innerOperands) {
  // Renumber the producer's operands to start at `slot`.
  auto shift = [&](const ScalarExpr &op) {
    if (slot == 0)
      return op;
    return ScalarExpr::operand(op.getOperandIndex() + slot, op.getType());
  };
  ScalarExpr placed = Rewriter(shift).rewrite(inner);
  auto splice = [&](const ScalarExpr &op) {
    unsigned k = op.getOperandIndex();
    if (k == slot) {
      assert(placed.getType() == op.getType() &&
             "composed producer of another type");
      return placed;
    }
    if (k < slot)
      return op;
    return ScalarExpr::operand(k + innerOperands - 1, op.getType());
  };
  return Rewriter(splice).rewrite(outer);
}
