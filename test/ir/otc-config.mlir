// RUN: otc-opt %s | otc-opt | FileCheck %s
// RUN: echo 'module {}' | otc-opt "--otc-configure=micro-batch=8 grad-accum=16 precision=bf16 weight-decay=0.1 target=cuda" | FileCheck %s --check-prefix=PASS
// RUN: echo 'module {}' | not otc-opt --otc-configure=precision=fp16 2>&1 | FileCheck %s --check-prefix=BADPASS
// RUN: echo 'module {}' | not otc-opt "--otc-configure=fp32-grad-accum=true" 2>&1 | FileCheck %s --check-prefix=ACCUM
// RUN: echo 'module {}' | otc-opt "--otc-configure=precision=fp8 target=cuda" | FileCheck %s --check-prefix=FP8
// RUN: echo 'module {}' | otc-opt "--otc-configure=world-size=4 shard-optimizer=true" | otc-opt | FileCheck %s --check-prefix=ZERO

// Tests #otc.config (ir/OtcAttrs.td, ir/Config.h): it prints and parses
// back unchanged (doubles exactly), otc-configure sets it from its options
// (the target's default device model filled in), and out-of-range fields
// are refused by its verifier, from the parser and from the pass alike.

// CHECK: module attributes {otc.config = #otc.config<micro_batch = 4, grad_accum = 2, precision = "bf16", fp32_grad_accum = true, weight_decay = 1.000000e-01, beta1 = 9.000000e-01, beta2 = 0.99899999999999999, epsilon = 1.000000e-08, target = "cuda", device = "h200">}
module attributes {otc.config = #otc.config<micro_batch = 4, grad_accum = 2, precision = "bf16", fp32_grad_accum = true, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cuda", device = "h200">} {
}

// PASS: module attributes {otc.config = #otc.config<micro_batch = 8, grad_accum = 16, precision = "bf16", fp32_grad_accum = false, weight_decay = 1.000000e-01, beta1 = 9.000000e-01, beta2 = 0.99899999999999999, epsilon = 1.000000e-08, target = "cuda", device = "h100">}
// BADPASS: error: otc-configure: precision must be "fp32", "bf16" or "fp8", got "fp16"
// ACCUM: error: otc-configure: fp32_grad_accum needs precision "bf16" or "fp8"
// FP8: precision = "fp8", fp32_grad_accum = false, {{.*}} target = "cuda", device = "h100">}
// world_size and shard_optimizer are printed only when not their defaults
// (1 and false), and parse back.
// ZERO: device = "cpu", world_size = 4, shard_optimizer = true>}
