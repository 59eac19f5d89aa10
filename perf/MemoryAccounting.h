//===- MemoryAccounting.h - bytes of training state per parameter -*- C++
//-*-===//
//
// The per-parameter cost of training state with Adam, as a pure function of
// the precision recipe, so plan.json, the report and a unit test share one
// model: FP32 training keeps 4 (weights) + 4 (gradients) + 8 (Adam m, v) =
// 16 bytes; BF16 mixed precision keeps 2 (BF16 working weights) + 2 (BF16
// gradients) + 4 (FP32 master weights) + 8 = 16; with FP32 gradient
// accumulation the BF16 gradient of each micro-step is added into a 4-byte
// FP32 accumulator, 20 in all. (In otc's plan the BF16 micro-step gradients
// are temporaries of @micro_step, so they appear in the activation region,
// not among the persistent slots.)
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_MEMORYACCOUNTING_H
#define OTC_CODEGEN_MEMORYACCOUNTING_H

#include <cstdint>

namespace otc {

/// Bytes of each class of training state per trained parameter.
struct StateBytesPerParam {
  /// The weights the forward and backward read (BF16 copy in mixed precision).
  int64_t params = 0;
  /// FP32 master weights (mixed precision only).
  int64_t masterParams = 0;
  /// The gradient the backward produces.
  int64_t grads = 0;
  /// A separate FP32 accumulator of the gradient across micro-batches.
  int64_t gradAccum = 0;
  /// Adam's first and second moments.
  int64_t optimizer = 0;

  int64_t total() const {
    return params + masterParams + grads + gradAccum + optimizer;
  }
};

/// The state per parameter for FP32 training (`bf16` false) or BF16 mixed
/// precision, with or without FP32 gradient accumulation.
inline StateBytesPerParam stateBytesPerParam(bool bf16, bool fp32GradAccum) {
  StateBytesPerParam s;
  s.optimizer = 8;
  if (!bf16) {
    s.params = 4;
    s.grads = 4;
    return s;
  }
  s.params = 2;
  s.masterParams = 4;
  s.grads = 2;
  s.gradAccum = fp32GradAccum ? 4 : 0;
  return s;
}

/// The same per rank under ZeRO-1 over `ranks` (otc-compile
/// --shard-optimizer): each rank keeps 1/ranks of Adam's moments and, under
/// mixed precision (the steps read the BF16 copies), of the FP32 masters;
/// the weights the steps read and the gradients whole.
inline double stateBytesPerParamPerRank(bool bf16, bool fp32GradAccum,
                                        int64_t ranks) {
  StateBytesPerParam s = stateBytesPerParam(bf16, fp32GradAccum);
  int64_t sharded = s.optimizer + s.masterParams;
  return double(s.total() - sharded) +
         double(sharded) / double(ranks > 0 ? ranks : 1);
}

} // namespace otc

#endif // OTC_CODEGEN_MEMORYACCOUNTING_H
