// Tests the gradient of a class-weighted softmax cross-entropy in the form
// the importer builds it (SoftmaxCrossEntropyLoss with weights and
// ignore_index 3, mean reduction): the unweighted "none" loss times the
// gathered class weights of the rows not ignored, divided by their sum. Both
// the matmul weight and the class weights get finite-difference checked
// gradients.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: cw {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<8x4xf32> {otc.input = "x"},
                   %labels: tensor<8xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %cw: tensor<5xf32> {otc.param = "cw"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<8x4xf32>, tensor<4x5xf32>) -> tensor<8x5xf32>
  %1 = otc.softmax_cross_entropy %0, %labels {ignore_index = 3 : i64, reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<8xf32>
  %2 = otc.constant dense<3> : tensor<i64>
  %3 = otc.compare "ne", %labels, %2 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %4 = otc.constant dense<0> : tensor<i64>
  %5 = otc.select %3, %labels, %4 : (tensor<8xi1>, tensor<8xi64>, tensor<i64>) -> tensor<8xi64>
  %6 = otc.gather %cw, %5 {axis = 0 : i64} : (tensor<5xf32>, tensor<8xi64>) -> tensor<8xf32>
  %7 = otc.constant dense<0.000000e+00> : tensor<f32>
  %8 = otc.select %3, %6, %7 : (tensor<8xi1>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %9 = otc.mul %1, %8 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %10 = otc.reduce_sum %9, [0] : (tensor<8xf32>) -> tensor<f32>
  %11 = otc.reduce_sum %8, [0] : (tensor<8xf32>) -> tensor<f32>
  %12 = otc.div %10, %11 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %12 : tensor<f32>
}
