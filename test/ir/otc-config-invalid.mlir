// RUN: otc-opt %s --split-input-file --verify-diagnostics

// Tests the verifier of #otc.config: each field out of its range.

// expected-error@+1 {{micro_batch must be at least 1, got 0}}
module attributes {otc.config = #otc.config<micro_batch = 0, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu">} {
}

// -----

// expected-error@+1 {{grad_accum must be at least 1, got -2}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = -2, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu">} {
}

// -----

// expected-error@+1 {{beta1 must lie in [0, 1), got 1}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 1.0, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu">} {
}

// -----

// expected-error@+1 {{epsilon must be finite and positive, got 0}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 0.0, target = "cpu", device = "cpu">} {
}

// -----

// expected-error@+1 {{unknown target "tpu" (registered: cpu, cuda)}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "tpu", device = "cpu">} {
}

// -----

// expected-error@+1 {{weight_decay must be finite and non-negative, got -5.000000e-01}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = -0.5, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu">} {
}

// -----

// A device of another target: the H100 model predicts cuda programs only.
// expected-error@+1 {{target "cpu" has no device "h100" (its devices: cpu)}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "h100">} {
}

// -----

// expected-error@+1 {{shard_optimizer needs a world_size of 2 or more, got 1}}
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu", shard_optimizer = true>} {
}
