// RUN: otc-opt %s --split-input-file --verify-diagnostics

// Tests that a kernel body's arguments must match its inputs.
func.func @bad_arg() {
  %a = otck.buffer : memref<4xf32>
  %b = otck.buffer : memref<4xf32>
  // expected-error@+1 {{body argument type 'tensor<5xf32>' does not match input 'memref<4xf32>'}}
  otck.kernel ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%x: tensor<5xf32>):
    %y = otc.tanh %x : tensor<5xf32>
    otck.yield %y : tensor<5xf32>
  }
  return
}

// -----

// Tests that a kernel must yield one value per output.
func.func @bad_yield() {
  %a = otck.buffer : memref<4xf32>
  %b = otck.buffer : memref<4xf32>
  // expected-error@+1 {{must yield one value per output}}
  otck.kernel ins(%a : memref<4xf32>) outs(%b, %a : memref<4xf32>, memref<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = otc.tanh %x : tensor<4xf32>
    otck.yield %y : tensor<4xf32>
  }
  return
}
