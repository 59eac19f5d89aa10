//===- ScalarExprPrinter.cpp - scalar expressions as C --------------------===//
//
// The printer of ScalarExpr: one pass counts how often each node is used,
// a second prints bottom-up, binding nodes used more than once to locals.
// Each printed piece carries the precedence of its outermost C operator; a
// child is parenthesized when its precedence is lower than its position
// needs, and on the right of a left-associative operator also when equal,
// so `a - (b - c)` and `a * (b * c)` keep their grouping and the computed
// value is the tree's.
//
//===----------------------------------------------------------------------===//

#include "codegen/ScalarExprPrinter.h"
#include "codegen/BodyUtils.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <cassert>

using namespace mlir;
using namespace otc;

std::string otc::mathFunction(StringRef name, Type t) {
  return t.isF64() ? name.str() : (name + "f").str();
}

std::string otc::typedLiteral(double v, Type t) {
  if (isa<FloatType>(t) && (v == 0.0 || v == 1.0))
    return std::string(v == 0.0 ? "0.0" : "1.0") + (t.isF64() ? "" : "f");
  if (t.isF32() || t.isBF16())
    return floatLiteral(v);
  if (isa<FloatType>(t))
    return literal(v);
  return "(" + cTypeOf(t) + ")" + std::to_string((int64_t)v);
}

std::string otc::computeCType(Type t) {
  if (t.isF32() || t.isBF16())
    return "float";
  return cTypeOf(t);
}

namespace {

using Kind = ScalarExpr::Kind;

/// Precedences of C operators, higher binds tighter.
enum Prec : int {
  kTernary = 10,
  kEquality = 55,
  kRelational = 60,
  kAdditive = 70,
  kMultiplicative = 80,
  kUnary = 90,
  kPrimary = 100,
};

/// A printed subexpression and the precedence of its outermost operator.
struct Piece {
  std::string text;
  int prec = kPrimary;
};

/// `p` as an operand of a position that needs precedence `min`.
std::string wrap(const Piece &p, int min) {
  return p.prec < min ? "(" + p.text + ")" : p.text;
}

/// Integer max, min and abs print their arguments twice.
bool readsArgsTwice(const ScalarExpr &e) {
  if (isa<FloatType>(e.getType()))
    return false;
  return (e.getKind() == Kind::Binary &&
          (e.getBinaryOp() == ScalarExpr::BinaryOp::Max ||
           e.getBinaryOp() == ScalarExpr::BinaryOp::Min)) ||
         (e.getKind() == Kind::Unary &&
          e.getUnaryFn() == ScalarExpr::UnaryFn::Abs);
}

class Printer {
public:
  Printer(raw_ostream &os, ArrayRef<std::string> names, StringRef indent,
          StringRef prefix)
      : os(os), names(names), indent(indent), prefix(prefix) {}

  std::string run(const ScalarExpr &e) {
    count(e);
    return print(e, /*asCondition=*/false).text;
  }

private:
  void count(const ScalarExpr &e) {
    if (uses[e.getNode()]++)
      return;
    for (const ScalarExpr &a : e.getArgs()) {
      count(a);
      if (readsArgsTwice(e))
        ++uses[a.getNode()];
    }
  }

  /// `e`, bound to a local first when it is used more than once. A
  /// comparison read `asCondition` (a select's) is not converted to uint8_t.
  Piece print(const ScalarExpr &e, bool asCondition) {
    auto it = bound.find(e.getNode());
    if (it != bound.end())
      return {it->second, kPrimary};
    bool leaf = e.getKind() == Kind::Operand || e.getKind() == Kind::Constant;
    if (leaf || uses.lookup(e.getNode()) < 2)
      return format(e, asCondition);
    Piece p = format(e, /*asCondition=*/false);
    std::string name = prefix.str() + std::to_string(next++);
    os << indent << "const " << computeCType(e.getType()) << " " << name
       << " = " << p.text << ";\n";
    bound[e.getNode()] = name;
    return {name, kPrimary};
  }

  Piece format(const ScalarExpr &e, bool asCondition) {
    switch (e.getKind()) {
    case Kind::Operand:
      assert(e.getOperandIndex() < names.size() && "operand without a name");
      return {names[e.getOperandIndex()], kPrimary};
    case Kind::Constant: {
      std::string text = typedLiteral(e.getValue(), e.getType());
      bool prefixed = text[0] == '-' || text[0] == '(';
      return {text, prefixed ? kUnary : kPrimary};
    }
    case Kind::Unary:
      return formatUnary(e);
    case Kind::Binary:
      return formatBinary(e);
    case Kind::Compare:
      return formatCompare(e, asCondition);
    case Kind::Select: {
      std::string cond = wrap(print(e.getArg(0), true), kTernary + 1);
      std::string lhs = print(e.getArg(1), false).text;
      std::string rhs = wrap(print(e.getArg(2), false), kTernary);
      return {cond + " ? " + lhs + " : " + rhs, kTernary};
    }
    case Kind::Cast: {
      Piece x = print(e.getArg(0), false);
      if (e.getType().isInteger(1))
        return {"(uint8_t)(" + wrap(x, kEquality + 1) + " != 0)", kUnary};
      return {"(" + cTypeOf(e.getType()) + ")" + wrap(x, kUnary), kUnary};
    }
    }
    llvm_unreachable("unknown scalar expression kind");
  }

  Piece formatUnary(const ScalarExpr &e) {
    using Fn = ScalarExpr::UnaryFn;
    Type t = e.getType();
    Piece x = print(e.getArg(0), false);
    auto call = [&](StringRef fn) -> Piece {
      return {mathFunction(fn, t) + "(" + x.text + ")", kPrimary};
    };
    switch (e.getUnaryFn()) {
    case Fn::Neg:
      // `--x` would be a decrement.
      return {"-" + (x.text[0] == '-' ? "(" + x.text + ")" : wrap(x, kUnary)),
              kUnary};
    case Fn::Exp:
      return call("exp");
    case Fn::Log:
      return call("log");
    case Fn::Tanh:
      return call("tanh");
    case Fn::Sqrt:
      return call("sqrt");
    case Fn::Erf:
      return call("erf");
    case Fn::Cos:
      return call("cos");
    case Fn::Sin:
      return call("sin");
    case Fn::Abs: {
      if (isa<FloatType>(t))
        return call("fabs");
      std::string v = wrap(x, kUnary);
      return {wrap(x, kRelational) + " < 0 ? -" + v + " : " + v, kTernary};
    }
    }
    llvm_unreachable("unknown unary function");
  }

  Piece formatBinary(const ScalarExpr &e) {
    using Op = ScalarExpr::BinaryOp;
    Type t = e.getType();
    Piece a = print(e.getArg(0), false), b = print(e.getArg(1), false);
    auto infix = [&](StringRef sym, int prec) -> Piece {
      return {wrap(a, prec) + " " + sym.str() + " " + wrap(b, prec + 1), prec};
    };
    bool isFloat = isa<FloatType>(t);
    switch (e.getBinaryOp()) {
    case Op::Add:
      return infix("+", kAdditive);
    case Op::Sub:
      return infix("-", kAdditive);
    case Op::Mul:
      return infix("*", kMultiplicative);
    case Op::Div:
      return infix("/", kMultiplicative);
    case Op::Pow:
      if (isFloat)
        return {mathFunction("pow", t) + "(" + a.text + ", " + b.text + ")",
                kPrimary};
      // Integer powers go through double, truncated back.
      return {"(" + cTypeOf(t) + ")pow((double)" + wrap(a, kUnary) +
                  ", (double)" + wrap(b, kUnary) + ")",
              kUnary};
    case Op::Max:
    case Op::Min: {
      bool max = e.getBinaryOp() == Op::Max;
      if (isFloat)
        return {mathFunction(max ? "fmax" : "fmin", t) + "(" + a.text + ", " +
                    b.text + ")",
                kPrimary};
      return {wrap(a, kRelational) + (max ? " > " : " < ") +
                  wrap(b, kRelational + 1) + " ? " + a.text + " : " +
                  wrap(b, kTernary),
              kTernary};
    }
    }
    llvm_unreachable("unknown binary operation");
  }

  Piece formatCompare(const ScalarExpr &e, bool asCondition) {
    using P = ScalarExpr::Predicate;
    StringRef sym;
    int prec = kRelational;
    switch (e.getPredicate()) {
    case P::Eq:
      sym = "==", prec = kEquality;
      break;
    case P::Ne:
      sym = "!=", prec = kEquality;
      break;
    case P::Lt:
      sym = "<";
      break;
    case P::Le:
      sym = "<=";
      break;
    case P::Gt:
      sym = ">";
      break;
    case P::Ge:
      sym = ">=";
      break;
    }
    Piece a = print(e.getArg(0), false), b = print(e.getArg(1), false);
    std::string text =
        wrap(a, prec) + " " + sym.str() + " " + wrap(b, prec + 1);
    // As a value, a comparison is the 0 or 1 of an i1 element.
    if (asCondition)
      return {text, prec};
    return {"(uint8_t)(" + text + ")", kUnary};
  }

  raw_ostream &os;
  ArrayRef<std::string> names;
  StringRef indent, prefix;
  llvm::DenseMap<const void *, unsigned> uses;
  llvm::DenseMap<const void *, std::string> bound;
  unsigned next = 0;
};

} // namespace

std::string otc::printScalarExpr(raw_ostream &os, const ScalarExpr &e,
                                 ArrayRef<std::string> operandNames,
                                 StringRef indent, StringRef tempPrefix) {
  return Printer(os, operandNames, indent, tempPrefix).run(e);
}
