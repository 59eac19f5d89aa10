// tiny-planned.mlir with a BUFFER slot, "buffer:s" [4] (a frozen
// initializer): loss = sum(x * w * s), its gradient and AdamW. The lines
// that would write the buffer are comments here, which
// buffers-unwritten.test turns into code: those marked WRITE (a kernel
// writing a view of it in @optimizer_step) or those marked COPY (a copy
// into it in @zero_grads).
module attributes {otc.config = #otc.config<micro_batch = 2, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cpu", device = "cpu">, otck.alignment = 256 : i64, otck.arena_size = 3328 : i64} {
  func.func @zero_grads() {
    %g = otck.buffer {offset = 0 : i64, slot = "grad:w"} : memref<4xf32>
    otck.kernel outs(%g : memref<4xf32>) {
      %z = otc.constant dense<0.0> : tensor<4xf32>
      otck.yield %z : tensor<4xf32>
    }
// COPY:    %buf = otck.buffer {offset = 3072 : i64, slot = "buffer:s"} : memref<4xf32>
// COPY:    otck.copy %g, %buf : memref<4xf32> loc("/Copy")
    return
  }
  func.func @micro_step() {
    %x = otck.buffer {offset = 256 : i64, slot = "input:x"} : memref<2x4xf32>
    %w = otck.buffer {offset = 512 : i64, slot = "param:w"} : memref<4xf32>
    %l = otck.buffer {offset = 768 : i64, slot = "loss"} : memref<f32>
    %g = otck.buffer {offset = 0 : i64, slot = "grad:w"} : memref<4xf32>
    %buf = otck.buffer {offset = 3072 : i64, slot = "buffer:s"} : memref<4xf32>
    %t = otck.buffer {offset = 2816 : i64} : memref<2x4xf32>
    otck.kernel ins(%x, %w, %buf : memref<2x4xf32>, memref<4xf32>, memref<4xf32>) outs(%t : memref<2x4xf32>) {
    ^bb0(%a: tensor<2x4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>):
      %p = otc.mul %a, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      %q = otc.mul %p, %c : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      otck.yield %q : tensor<2x4xf32>
    } loc("/Mul")
    otck.kernel ins(%t : memref<2x4xf32>) outs(%l : memref<f32>) {
    ^bb0(%a: tensor<2x4xf32>):
      %s = otc.reduce_sum %a, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
      otck.yield %s : tensor<f32>
    } loc("/ReduceSum")
    %r = otck.buffer {offset = 2560 : i64} : memref<4xf32>
    otck.kernel ins(%x : memref<2x4xf32>) outs(%r : memref<4xf32>) {
    ^bb0(%a: tensor<2x4xf32>):
      %s = otc.reduce_sum %a, [0] : (tensor<2x4xf32>) -> tensor<4xf32>
      otck.yield %s : tensor<4xf32>
    } loc("/Mul:grad")
    otck.kernel ins(%g, %r : memref<4xf32>, memref<4xf32>) outs(%g : memref<4xf32>) {
    ^bb0(%acc: tensor<4xf32>, %d: tensor<4xf32>):
      %n = otc.add %acc, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      otck.yield %n : tensor<4xf32>
    } loc("/Mul:accumulate")
    return
  }
  func.func @optimizer_step() {
    %p = otck.buffer {offset = 512 : i64, slot = "param:w"} : memref<4xf32>
    %g = otck.buffer {offset = 0 : i64, slot = "grad:w"} : memref<4xf32>
    %m = otck.buffer {offset = 1024 : i64, slot = "adam_m:w"} : memref<4xf32>
    %v = otck.buffer {offset = 1280 : i64, slot = "adam_v:w"} : memref<4xf32>
    %lr = otck.buffer {offset = 1536 : i64, slot = "lr"} : memref<f32>
    %t = otck.buffer {offset = 1792 : i64, slot = "step"} : memref<f32>
    %f = otck.buffer {offset = 2048 : i64, slot = "grad_factor"} : memref<f32>
    otck.kernel ins(%p, %g, %m, %v, %lr, %t, %f : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%p, %m, %v : memref<4xf32>, memref<4xf32>, memref<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %e: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
      %np, %nm, %nv = otc.adamw %a, %b, %c, %d, %e, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      otck.yield %np, %nm, %nv : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    } loc("AdamW")
// WRITE:    %buf = otck.buffer {offset = 3072 : i64, slot = "buffer:s"} : memref<4xf32>
// WRITE:    %sv = otck.view %buf : memref<4xf32> to memref<2x2xf32>
// WRITE:    otck.kernel outs(%sv : memref<2x2xf32>) {
// WRITE:      %z = otc.constant dense<0.0> : tensor<2x2xf32>
// WRITE:      otck.yield %z : tensor<2x2xf32>
// WRITE:    } loc("/Zero")
    return
  }
}
