//===- DecodeStep.h - one position at a time, keys and values cached -*- C++ -*-===//
//
// `@decode_step` (otc-compile --generate, otc-training-loop{decode}): the
// forward of one position of every row of the micro-batch, for sampling.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_DECODESTEP_H
#define OTC_PASSES_DECODESTEP_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace otc {

/// Builds `@decode_step` at the end of `module` from `eval` (`@eval_step`,
/// whose loss is a cross-entropy over the model's logits). Its arguments
/// are `eval`'s parameters and buffers, "decode_tokens:<input>" ([B, 1]
/// ids at the position), "decode_position" (tensor<1xi64>) and one
/// "kv_cache:<n>.k" and ".v" per causal attention, [B, Hk, T, D] whatever
/// the attention's layout; its results are
/// "logits" ([B, V] floats of the position) and the caches, updated at the
/// position. Every op of the logits' slice that depends on the tokens is
/// restricted to the position: its sequence axis (traced from the tokens
/// through products, reshapes, transposes, norms and elementwise ops) has
/// size 1, or, merged by a reshape with other axes (a mixture of experts'
/// [B·T, C] tokens and [B·T·k, C] expert rows), the position's rows of
/// them; a constant or buffer broadcast along that axis is read at the
/// position, and each attention writes the position's keys and values into
/// its cache and attends to the cached ones up to the position (and within
/// its window). Other integer inputs of shape [B, T] (an attention mask)
/// are ones, as `train --data` feeds them. Fails with an error on `eval`
/// that names what cannot be decoded one position at a time.
mlir::LogicalResult buildDecodeStep(mlir::ModuleOp module,
                                    mlir::func::FuncOp eval);

} // namespace otc

#endif // OTC_PASSES_DECODESTEP_H
