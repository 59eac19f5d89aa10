//===- Fp8.cpp - the FP8 formats of a GEMM's operands ---------------------===//
//
// The `fp8` attribute of ir/Fp8.h: its text, and its check.
//
//===----------------------------------------------------------------------===//

#include "ir/Fp8.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace otc;

StringRef otc::fp8FormatName(Fp8Format f) {
  return f == Fp8Format::E4M3 ? "e4m3" : "e5m2";
}

double otc::fp8Max(Fp8Format f) {
  return f == Fp8Format::E4M3 ? 448.0 : 57344.0;
}

std::string otc::fp8AttrText(Fp8Operands o) {
  return (fp8FormatName(o.lhs) + "," + fp8FormatName(o.rhs)).str();
}

std::optional<Fp8Format> otc::parseFp8Format(StringRef s) {
  if (s == "e4m3")
    return Fp8Format::E4M3;
  if (s == "e5m2")
    return Fp8Format::E5M2;
  return std::nullopt;
}

/// The operands' formats of the attribute's text, or nullopt.
static std::optional<Fp8Operands> parseOperands(StringRef text) {
  auto [l, r] = text.split(',');
  std::optional<Fp8Format> lhs = parseFp8Format(l), rhs = parseFp8Format(r);
  if (!lhs || !rhs)
    return std::nullopt;
  return Fp8Operands{*lhs, *rhs};
}

std::optional<Fp8Operands> otc::gemmFp8(Operation *op) {
  auto text = op->getAttrOfType<StringAttr>(kFp8Attr);
  if (!text)
    return std::nullopt;
  return parseOperands(text.getValue());
}

Fp8Layout otc::fp8OperandLayout(bool lhs, bool transposed) {
  return lhs == transposed ? kFp8Transposed : kFp8AsStored;
}

int64_t otc::fp8CopyBytes(int64_t elements, int64_t layouts) {
  int64_t padded = (elements + 255) / 256 * 256;
  int64_t count =
      (layouts & kFp8AsStored ? 1 : 0) + (layouts & kFp8Transposed ? 1 : 0);
  return count * padded + 256;
}

void otc::setGemmFp8(Operation *op, Fp8Operands o) {
  op->setAttr(kFp8Attr, StringAttr::get(op->getContext(), fp8AttrText(o)));
}

LogicalResult otc::verifyGemmFp8(Operation *op, Type lhsElement,
                                 Type rhsElement) {
  Attribute attr = op->getAttr(kFp8Attr);
  if (!attr)
    return success();
  auto text = dyn_cast<StringAttr>(attr);
  std::optional<Fp8Operands> o =
      text ? parseOperands(text.getValue()) : std::nullopt;
  if (!o)
    return op->emitOpError("fp8 must be \"F,F\" with F e4m3 or e5m2, got ")
           << attr;
  if (o->lhs == Fp8Format::E5M2 && o->rhs == Fp8Format::E5M2)
    return op->emitOpError("fp8 cannot be e5m2 for both operands");
  if (!lhsElement.isBF16() || !rhsElement.isBF16())
    return op->emitOpError("fp8 needs bf16 operands");
  return success();
}
