//===- Bf16Prelude.cpp - BF16 storage in the generated programs -----------===//
//
// The source every program with BF16 buffers starts with: `otc_bf16`, whose
// loads widen to float and whose stores round to nearest even through the
// runtime's own functions (otcrt/bf16.h, host and device), so that both
// targets round bit for bit as the runtime's kernels.
//
//===----------------------------------------------------------------------===//

#include "codegen/Bf16Prelude.h"
#include "ir/OtckDialect.h"

using namespace mlir;
using namespace otc;

namespace {

/// BF16 storage for the cpu and cuda targets, on the runtime's rounding.
static const char kBf16Prelude[] = R"(#include "otcrt/bf16.h"
/// A bfloat16 in memory: arithmetic happens in float, every store rounds.
struct otc_bf16 {
  uint16_t bits;
  otc_bf16() = default;
  OTCRT_HD explicit otc_bf16(float f) : bits(otcrt_float_to_bf16(f)) {}
  OTCRT_HD operator float() const { return otcrt_bf16_to_float(bits); }
  OTCRT_HD otc_bf16 &operator=(float f) {
    bits = otcrt_float_to_bf16(f);
    return *this;
  }
};

)";

} // namespace

const char *otc::bf16Prelude() { return kBf16Prelude; }

bool otc::usesBf16(ModuleOp module) {
  bool found = false;
  module.walk([&](otck::BufferOp b) {
    found |= b.getType().getElementType().isBF16();
  });
  return found;
}

