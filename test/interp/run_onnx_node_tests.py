#!/usr/bin/env python3
"""Checks otc-run's forward results against ONNX's own backend node tests.

Each node test (Debian's libonnx-testdata, /usr/share/libonnx-testdata/data/
node/<test>/) holds a model.onnx (one node, or its "_expanded" form in other
ops) and test_data_set_0/{input,output}_N.pb TensorProtos computed by ONNX's
reference implementation: an oracle that is independent of otc.
TESTS_BY_OP lists every test of the ops of issue 3; for each one not
EXCLUDED (out of scope) or PENDING_IMPORTER (in scope, not imported yet),
this script writes the inputs to a safetensors file (named after the graph
inputs; shape-like inputs become initializers, see CONST_INPUTS), runs
`otc-run model.onnx --inputs IN --outputs OUT`, and compares every graph
output with the expected one (same shape; integers and booleans exactly and
with the same dtype, floats with numpy.allclose, rtol 1e-5, atol 1e-6).

Prints one line per test, `name PASS`, `name FAIL (why)`, `name EXCLUDED
(reason)` or `name PENDING (reason)`, then the counts; a test of those ops in
the data directory that TESTS_BY_OP misses is `name UNLISTED` and fails.
Exits 1 when any test failed. Needs numpy and onnx (Debian's
/usr/bin/python3).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"

# The ops of issue 3, whose node tests this script covers.
OPS = ("Add Sub Mul Div Pow Sqrt Reciprocal Neg Exp Log Erf Tanh Sigmoid Relu "
       "Gelu MatMul Gemm Softmax LogSoftmax LayerNormalization ReduceMean "
       "ReduceSum ReduceMax Reshape Transpose Concat Split Slice Gather "
       "Unsqueeze Squeeze Expand Where Equal Cast Shape ConstantOfShape Range "
       "Trilu Identity Constant Dropout SoftmaxCrossEntropyLoss "
       "NegativeLogLikelihoodLoss").split()

# Every node test of those ops in libonnx-testdata 1.12 (without the "test_"
# prefix): the one-node tests and their "_expanded" forms (the op written
# in other ops). Gelu has none: it is opset 20, newer than ONNX 1.12. Each
# runs unless EXCLUDED or PENDING_IMPORTER says why not; main() checks that
# the data directory holds no test of these ops missing from this list.
TESTS_BY_OP = {
    "Add": [
        "add", "add_bcast", "add_uint8"
    ],
    "Sub": [
        "sub", "sub_bcast", "sub_example", "sub_uint8"
    ],
    "Mul": [
        "mul", "mul_bcast", "mul_example", "mul_uint8"
    ],
    "Div": [
        "div", "div_bcast", "div_example", "div_uint8"
    ],
    "Pow": [
        "pow", "pow_bcast_array", "pow_bcast_scalar", "pow_example",
        "pow_types_float", "pow_types_float32_int32", "pow_types_float32_int64",
        "pow_types_float32_uint32", "pow_types_float32_uint64", "pow_types_int",
        "pow_types_int32_float32", "pow_types_int32_int32",
        "pow_types_int64_float32", "pow_types_int64_int64"
    ],
    "Sqrt": [
        "sqrt", "sqrt_example"
    ],
    "Reciprocal": [
        "reciprocal", "reciprocal_example"
    ],
    "Neg": [
        "neg", "neg_example"
    ],
    "Exp": [
        "exp", "exp_example"
    ],
    "Log": [
        "log", "log_example"
    ],
    "Erf": [
        "erf"
    ],
    "Tanh": [
        "tanh", "tanh_example"
    ],
    "Sigmoid": [
        "sigmoid", "sigmoid_example"
    ],
    "Relu": [
        "relu"
    ],
    "Gelu": [
    ],
    "MatMul": [
        "matmul_2d", "matmul_3d", "matmul_4d"
    ],
    "Gemm": [
        "gemm_all_attributes", "gemm_alpha", "gemm_beta",
        "gemm_default_matrix_bias", "gemm_default_no_bias",
        "gemm_default_scalar_bias", "gemm_default_single_elem_vector_bias",
        "gemm_default_vector_bias", "gemm_default_zero_bias", "gemm_transposeA",
        "gemm_transposeB"
    ],
    "Softmax": [
        "softmax_axis_0", "softmax_axis_0_expanded", "softmax_axis_1",
        "softmax_axis_1_expanded", "softmax_axis_2", "softmax_axis_2_expanded",
        "softmax_default_axis", "softmax_default_axis_expanded",
        "softmax_example", "softmax_example_expanded", "softmax_large_number",
        "softmax_large_number_expanded", "softmax_negative_axis",
        "softmax_negative_axis_expanded"
    ],
    "LogSoftmax": [
        "logsoftmax_axis_0", "logsoftmax_axis_0_expanded", "logsoftmax_axis_1",
        "logsoftmax_axis_1_expanded", "logsoftmax_axis_2",
        "logsoftmax_axis_2_expanded", "logsoftmax_default_axis",
        "logsoftmax_default_axis_expanded", "logsoftmax_example_1",
        "logsoftmax_example_1_expanded", "logsoftmax_large_number",
        "logsoftmax_large_number_expanded", "logsoftmax_negative_axis",
        "logsoftmax_negative_axis_expanded"
    ],
    "LayerNormalization": [
        "layer_normalization_2d_axis0", "layer_normalization_2d_axis0_expanded",
        "layer_normalization_2d_axis1", "layer_normalization_2d_axis1_expanded",
        "layer_normalization_2d_axis_negative_1",
        "layer_normalization_2d_axis_negative_1_expanded",
        "layer_normalization_2d_axis_negative_2",
        "layer_normalization_2d_axis_negative_2_expanded",
        "layer_normalization_3d_axis0_epsilon",
        "layer_normalization_3d_axis0_epsilon_expanded",
        "layer_normalization_3d_axis1_epsilon",
        "layer_normalization_3d_axis1_epsilon_expanded",
        "layer_normalization_3d_axis2_epsilon",
        "layer_normalization_3d_axis2_epsilon_expanded",
        "layer_normalization_3d_axis_negative_1_epsilon",
        "layer_normalization_3d_axis_negative_1_epsilon_expanded",
        "layer_normalization_3d_axis_negative_2_epsilon",
        "layer_normalization_3d_axis_negative_2_epsilon_expanded",
        "layer_normalization_3d_axis_negative_3_epsilon",
        "layer_normalization_3d_axis_negative_3_epsilon_expanded",
        "layer_normalization_4d_axis0", "layer_normalization_4d_axis0_expanded",
        "layer_normalization_4d_axis1", "layer_normalization_4d_axis1_expanded",
        "layer_normalization_4d_axis2", "layer_normalization_4d_axis2_expanded",
        "layer_normalization_4d_axis3", "layer_normalization_4d_axis3_expanded",
        "layer_normalization_4d_axis_negative_1",
        "layer_normalization_4d_axis_negative_1_expanded",
        "layer_normalization_4d_axis_negative_2",
        "layer_normalization_4d_axis_negative_2_expanded",
        "layer_normalization_4d_axis_negative_3",
        "layer_normalization_4d_axis_negative_3_expanded",
        "layer_normalization_4d_axis_negative_4",
        "layer_normalization_4d_axis_negative_4_expanded",
        "layer_normalization_default_axis",
        "layer_normalization_default_axis_expanded"
    ],
    "ReduceMean": [
        "reduce_mean_default_axes_keepdims_example",
        "reduce_mean_default_axes_keepdims_random",
        "reduce_mean_do_not_keepdims_example",
        "reduce_mean_do_not_keepdims_random", "reduce_mean_keepdims_example",
        "reduce_mean_keepdims_random",
        "reduce_mean_negative_axes_keepdims_example",
        "reduce_mean_negative_axes_keepdims_random"
    ],
    "ReduceSum": [
        "reduce_sum_default_axes_keepdims_example",
        "reduce_sum_default_axes_keepdims_random",
        "reduce_sum_do_not_keepdims_example",
        "reduce_sum_do_not_keepdims_random",
        "reduce_sum_empty_axes_input_noop_example",
        "reduce_sum_empty_axes_input_noop_random",
        "reduce_sum_keepdims_example", "reduce_sum_keepdims_random",
        "reduce_sum_negative_axes_keepdims_example",
        "reduce_sum_negative_axes_keepdims_random"
    ],
    "ReduceMax": [
        "reduce_max_default_axes_keepdim_example",
        "reduce_max_default_axes_keepdims_random",
        "reduce_max_do_not_keepdims_example",
        "reduce_max_do_not_keepdims_random", "reduce_max_keepdims_example",
        "reduce_max_keepdims_random",
        "reduce_max_negative_axes_keepdims_example",
        "reduce_max_negative_axes_keepdims_random"
    ],
    "Reshape": [
        "reshape_allowzero_reordered", "reshape_extended_dims",
        "reshape_negative_dim", "reshape_negative_extended_dims",
        "reshape_one_dim", "reshape_reduced_dims", "reshape_reordered_all_dims",
        "reshape_reordered_last_dims", "reshape_zero_and_negative_dim",
        "reshape_zero_dim"
    ],
    "Transpose": [
        "transpose_all_permutations_0", "transpose_all_permutations_1",
        "transpose_all_permutations_2", "transpose_all_permutations_3",
        "transpose_all_permutations_4", "transpose_all_permutations_5",
        "transpose_default"
    ],
    "Concat": [
        "concat_1d_axis_0", "concat_1d_axis_negative_1", "concat_2d_axis_0",
        "concat_2d_axis_1", "concat_2d_axis_negative_1",
        "concat_2d_axis_negative_2", "concat_3d_axis_0", "concat_3d_axis_1",
        "concat_3d_axis_2", "concat_3d_axis_negative_1",
        "concat_3d_axis_negative_2", "concat_3d_axis_negative_3"
    ],
    "Split": [
        "split_equal_parts_1d", "split_equal_parts_2d",
        "split_equal_parts_default_axis", "split_variable_parts_1d",
        "split_variable_parts_2d", "split_variable_parts_default_axis",
        "split_zero_size_splits"
    ],
    "Slice": [
        "slice", "slice_default_axes", "slice_default_steps",
        "slice_end_out_of_bounds", "slice_neg", "slice_neg_steps",
        "slice_negative_axes", "slice_start_out_of_bounds"
    ],
    "Gather": [
        "gather_0", "gather_1", "gather_2d_indices", "gather_negative_indices"
    ],
    "Unsqueeze": [
        "unsqueeze_axis_0", "unsqueeze_axis_1", "unsqueeze_axis_2",
        "unsqueeze_axis_3", "unsqueeze_negative_axes", "unsqueeze_three_axes",
        "unsqueeze_two_axes", "unsqueeze_unsorted_axes"
    ],
    "Squeeze": [
        "squeeze", "squeeze_negative_axes"
    ],
    "Expand": [
        "expand_dim_changed", "expand_dim_unchanged"
    ],
    "Where": [
        "where_example", "where_long_example"
    ],
    "Equal": [
        "equal", "equal_bcast"
    ],
    "Cast": [
        "cast_BFLOAT16_to_FLOAT", "cast_DOUBLE_to_FLOAT",
        "cast_DOUBLE_to_FLOAT16", "cast_FLOAT16_to_DOUBLE",
        "cast_FLOAT16_to_FLOAT", "cast_FLOAT_to_BFLOAT16",
        "cast_FLOAT_to_DOUBLE", "cast_FLOAT_to_FLOAT16", "cast_FLOAT_to_STRING",
        "cast_STRING_to_FLOAT", "castlike_BFLOAT16_to_FLOAT_expanded",
        "castlike_DOUBLE_to_FLOAT16_expanded",
        "castlike_DOUBLE_to_FLOAT_expanded",
        "castlike_FLOAT16_to_DOUBLE_expanded",
        "castlike_FLOAT16_to_FLOAT_expanded",
        "castlike_FLOAT_to_BFLOAT16_expanded",
        "castlike_FLOAT_to_DOUBLE_expanded",
        "castlike_FLOAT_to_FLOAT16_expanded",
        "castlike_FLOAT_to_STRING_expanded", "castlike_STRING_to_FLOAT_expanded"
    ],
    "Shape": [
        "shape", "shape_clip_end", "shape_clip_start", "shape_end_1",
        "shape_end_negative_1", "shape_example", "shape_start_1",
        "shape_start_1_end_2", "shape_start_1_end_negative_1",
        "shape_start_negative_1"
    ],
    "ConstantOfShape": [
        "constantofshape_float_ones", "constantofshape_int_shape_zero",
        "constantofshape_int_zeros"
    ],
    "Range": [
        "range_float_type_positive_delta",
        "range_float_type_positive_delta_expanded",
        "range_int32_type_negative_delta",
        "range_int32_type_negative_delta_expanded"
    ],
    "Trilu": [
        "tril", "tril_neg", "tril_one_row_neg", "tril_out_neg", "tril_out_pos",
        "tril_pos", "tril_square", "tril_square_neg", "tril_zero", "triu",
        "triu_neg", "triu_one_row", "triu_out_neg_out", "triu_out_pos",
        "triu_pos", "triu_square", "triu_square_neg", "triu_zero"
    ],
    "Identity": [
        "identity", "identity_opt", "identity_sequence"
    ],
    "Constant": [
        "constant"
    ],
    "Dropout": [
        "dropout_default", "dropout_default_mask", "dropout_default_mask_ratio",
        "dropout_default_old", "dropout_default_ratio", "dropout_random_old",
        "training_dropout", "training_dropout_default",
        "training_dropout_default_mask", "training_dropout_mask",
        "training_dropout_zero_ratio", "training_dropout_zero_ratio_mask"
    ],
    "SoftmaxCrossEntropyLoss": [
        "sce_NCd1_mean_weight_negative_ii",
        "sce_NCd1_mean_weight_negative_ii_expanded",
        "sce_NCd1_mean_weight_negative_ii_log_prob",
        "sce_NCd1_mean_weight_negative_ii_log_prob_expanded",
        "sce_NCd1d2d3_none_no_weight_negative_ii",
        "sce_NCd1d2d3_none_no_weight_negative_ii_expanded",
        "sce_NCd1d2d3_none_no_weight_negative_ii_log_prob",
        "sce_NCd1d2d3_none_no_weight_negative_ii_log_prob_expanded",
        "sce_NCd1d2d3_sum_weight_high_ii",
        "sce_NCd1d2d3_sum_weight_high_ii_expanded",
        "sce_NCd1d2d3_sum_weight_high_ii_log_prob",
        "sce_NCd1d2d3_sum_weight_high_ii_log_prob_expanded",
        "sce_NCd1d2d3d4d5_mean_weight", "sce_NCd1d2d3d4d5_mean_weight_expanded",
        "sce_NCd1d2d3d4d5_mean_weight_log_prob",
        "sce_NCd1d2d3d4d5_mean_weight_log_prob_expanded",
        "sce_NCd1d2d3d4d5_none_no_weight",
        "sce_NCd1d2d3d4d5_none_no_weight_expanded",
        "sce_NCd1d2d3d4d5_none_no_weight_log_prob",
        "sce_NCd1d2d3d4d5_none_no_weight_log_prob_expanded", "sce_mean",
        "sce_mean_3d", "sce_mean_3d_expanded", "sce_mean_3d_log_prob",
        "sce_mean_3d_log_prob_expanded", "sce_mean_expanded",
        "sce_mean_log_prob", "sce_mean_log_prob_expanded",
        "sce_mean_no_weight_ii", "sce_mean_no_weight_ii_3d",
        "sce_mean_no_weight_ii_3d_expanded",
        "sce_mean_no_weight_ii_3d_log_prob",
        "sce_mean_no_weight_ii_3d_log_prob_expanded",
        "sce_mean_no_weight_ii_4d", "sce_mean_no_weight_ii_4d_expanded",
        "sce_mean_no_weight_ii_4d_log_prob",
        "sce_mean_no_weight_ii_4d_log_prob_expanded",
        "sce_mean_no_weight_ii_expanded", "sce_mean_no_weight_ii_log_prob",
        "sce_mean_no_weight_ii_log_prob_expanded", "sce_mean_weight",
        "sce_mean_weight_expanded", "sce_mean_weight_ii",
        "sce_mean_weight_ii_3d", "sce_mean_weight_ii_3d_expanded",
        "sce_mean_weight_ii_3d_log_prob",
        "sce_mean_weight_ii_3d_log_prob_expanded", "sce_mean_weight_ii_4d",
        "sce_mean_weight_ii_4d_expanded", "sce_mean_weight_ii_4d_log_prob",
        "sce_mean_weight_ii_4d_log_prob_expanded",
        "sce_mean_weight_ii_expanded", "sce_mean_weight_ii_log_prob",
        "sce_mean_weight_ii_log_prob_expanded", "sce_mean_weight_log_prob",
        "sce_mean_weight_log_prob_expanded", "sce_none", "sce_none_expanded",
        "sce_none_log_prob", "sce_none_log_prob_expanded", "sce_none_weights",
        "sce_none_weights_expanded", "sce_none_weights_log_prob",
        "sce_none_weights_log_prob_expanded", "sce_sum", "sce_sum_expanded",
        "sce_sum_log_prob", "sce_sum_log_prob_expanded"
    ],
    "NegativeLogLikelihoodLoss": [
        "nllloss_NC", "nllloss_NC_expanded", "nllloss_NCd1",
        "nllloss_NCd1_expanded", "nllloss_NCd1_ii", "nllloss_NCd1_ii_expanded",
        "nllloss_NCd1_mean_weight_negative_ii",
        "nllloss_NCd1_mean_weight_negative_ii_expanded", "nllloss_NCd1_weight",
        "nllloss_NCd1_weight_expanded", "nllloss_NCd1_weight_ii",
        "nllloss_NCd1_weight_ii_expanded", "nllloss_NCd1d2",
        "nllloss_NCd1d2_expanded", "nllloss_NCd1d2_no_weight_reduction_mean_ii",
        "nllloss_NCd1d2_no_weight_reduction_mean_ii_expanded",
        "nllloss_NCd1d2_reduction_mean",
        "nllloss_NCd1d2_reduction_mean_expanded",
        "nllloss_NCd1d2_reduction_sum", "nllloss_NCd1d2_reduction_sum_expanded",
        "nllloss_NCd1d2_with_weight", "nllloss_NCd1d2_with_weight_expanded",
        "nllloss_NCd1d2_with_weight_reduction_mean",
        "nllloss_NCd1d2_with_weight_reduction_mean_expanded",
        "nllloss_NCd1d2_with_weight_reduction_sum",
        "nllloss_NCd1d2_with_weight_reduction_sum_expanded",
        "nllloss_NCd1d2_with_weight_reduction_sum_ii",
        "nllloss_NCd1d2_with_weight_reduction_sum_ii_expanded",
        "nllloss_NCd1d2d3_none_no_weight_negative_ii",
        "nllloss_NCd1d2d3_none_no_weight_negative_ii_expanded",
        "nllloss_NCd1d2d3_sum_weight_high_ii",
        "nllloss_NCd1d2d3_sum_weight_high_ii_expanded",
        "nllloss_NCd1d2d3d4d5_mean_weight",
        "nllloss_NCd1d2d3d4d5_mean_weight_expanded",
        "nllloss_NCd1d2d3d4d5_none_no_weight",
        "nllloss_NCd1d2d3d4d5_none_no_weight_expanded"
    ],
}

# Tests outside otc's scope, by reason.
EXCLUDED_BY_REASON = {
    "uint8 tensors are outside the otc dialect": [
        "add_uint8", "sub_uint8", "mul_uint8", "div_uint8"],
    "unsigned exponent (uint32/uint64) is outside the otc dialect": [
        "pow_types_float32_uint32", "pow_types_float32_uint64"],
    "string tensors are outside the otc dialect": [
        "cast_FLOAT_to_STRING", "cast_STRING_to_FLOAT",
        "castlike_FLOAT_to_STRING_expanded",
        "castlike_STRING_to_FLOAT_expanded"],
    "optional and sequence types are outside the otc dialect": [
        "identity_opt", "identity_sequence"],
    "zero-sized dimension; otc tensors are never empty": [
        "reshape_allowzero_reordered", "split_zero_size_splits",
        "slice_start_out_of_bounds", "tril_zero", "triu_zero",
        "constantofshape_int_shape_zero"],
    "negative slice steps (otc.slice strides are positive)": [
        "slice_neg_steps"],
    "opset 12 (Pow-12); the importer reads opsets 13 to 21": [
        "pow_types_float", "pow_types_int"],
    "opset 11 (Unsqueeze-11 takes axes as an attribute); the importer reads "
    "opsets 13 to 21": ["unsqueeze_axis_3"],
    "opset 11/6 Dropout (ratio attribute, is_test); the importer reads "
    "opsets 13 to 21": ["dropout_default_old", "dropout_random_old"],
    "training-mode Dropout with a random mask: numpy's draw cannot be "
    "reproduced (otc's mask is a hash of the key; checked by "
    "interp-ops.mlir)": [
        "training_dropout", "training_dropout_default",
        "training_dropout_default_mask", "training_dropout_mask"],
    "the expanded form uses Loop, outside issue 3's op list": [
        "range_float_type_positive_delta_expanded",
        "range_int32_type_negative_delta_expanded"],
    "the expanded form uses Flatten and Size, outside issue 3's op list": [
        name + "_expanded" for name in TESTS_BY_OP["LayerNormalization"]
        if not name.endswith("_expanded")],
    "the expanded form uses GatherElements, outside issue 3's op list": [
        name + "_expanded" for name in TESTS_BY_OP["NegativeLogLikelihoodLoss"]
        if not name.endswith("_expanded")],
    "ONNX 1.12's expected bfloat16 values truncate the float32 ones (otc "
    "rounds to nearest even, as PyTorch does)": ["cast_FLOAT_to_BFLOAT16"],
    "inconsistent test data: input 'like' is [1] in test_data_set_0 but "
    "[3, 4] in the model": [
        "castlike_BFLOAT16_to_FLOAT_expanded",
        "castlike_FLOAT_to_BFLOAT16_expanded"],
    "class weights (a third input) are not supported": [
        name for op in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss")
        for name in TESTS_BY_OP[op]
        if "weight" in name and "no_weight" not in name
        and not (op == "NegativeLogLikelihoodLoss"
                 and name.endswith("_expanded"))],
}

# Tests in scope that the importer does not support yet, by reason: they
# are reported as PENDING and run only with --pending.
PENDING_IMPORTER_BY_REASON = {
    "importer: every float is computed in f32, so a Cast to float16 is an "
    "identity and does not round to float16": [
        "cast_DOUBLE_to_FLOAT16", "cast_FLOAT_to_FLOAT16",
        "castlike_DOUBLE_to_FLOAT16_expanded",
        "castlike_FLOAT_to_FLOAT16_expanded"],
    "importer: Pow with an integer base is not imported (float bases only)": [
        "pow_types_int32_float32", "pow_types_int32_int32",
        "pow_types_int64_float32", "pow_types_int64_int64"],
    "importer: SoftmaxCrossEntropyLoss's second output (log_prob) is not "
    "imported yet": [
        "sce_mean_log_prob", "sce_sum_log_prob", "sce_none_log_prob",
        "sce_mean_3d_log_prob", "sce_mean_no_weight_ii_log_prob",
        "sce_mean_no_weight_ii_3d_log_prob",
        "sce_mean_no_weight_ii_4d_log_prob",
        "sce_NCd1d2d3_none_no_weight_negative_ii_log_prob",
        "sce_NCd1d2d3d4d5_none_no_weight_log_prob"],
}

# Graph outputs that the harness removes before running a test, with the
# reason: the remaining outputs are still checked.
DROPPED_OUTPUTS = {
    name: (["Mean", "InvStdDev"],
           "importer: only Y of LayerNormalization is imported (Mean and "
           "InvStdDev are pending)")
    for name in TESTS_BY_OP["LayerNormalization"]
    if not name.endswith("_expanded")
}

# Models whose opset is older than the importer's 13 but whose op has the
# same signature up to opset 21: the harness runs them as opset 13.
OPSET_BUMP = {
    "constantofshape_float_ones": "ConstantOfShape-9 is unchanged until 20",
    "constantofshape_int_zeros": "ConstantOfShape-9 is unchanged until 20",
    "range_float_type_positive_delta": "Range-11 is the current Range",
    "range_int32_type_negative_delta": "Range-11 is the current Range",
}

# Inputs (by position) that otc needs at import, as constants: the harness
# turns them into initializers holding the test's values. Only for one-node
# models of these ops.
CONST_INPUTS = {
    "Reshape": [1], "Dropout": [1, 2], "ReduceSum": [1], "ReduceMean": [1],
    "ReduceMax": [1], "Slice": [1, 2, 3, 4], "Split": [1], "Unsqueeze": [1],
    "Squeeze": [1], "Expand": [1], "ConstantOfShape": [0], "Range": [0, 1, 2],
    "Trilu": [1],
}


def invert(by_reason):
    """{reason: [short names]} -> {"test_" + name: reason}."""
    return {"test_" + name: reason
            for reason, names in by_reason.items() for name in names}


ALL_TESTS = {"test_" + name: op for op, names in TESTS_BY_OP.items()
             for name in names}
EXCLUDED = invert(EXCLUDED_BY_REASON)
PENDING_IMPORTER = invert(PENDING_IMPORTER_BY_REASON)

# safetensors dtype names of the numpy dtypes the tests use.
ST_DTYPES = {
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}
NP_DTYPES = {name: dtype for dtype, name in ST_DTYPES.items()}


class Bf16:
    """A bfloat16 tensor held as its raw uint16 bits (numpy has no bfloat16)."""

    def __init__(self, bits):
        self.bits = bits

    def to_float32(self):
        """The values, exactly, as float32."""
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors):
    """Writes {name: numpy array or Bf16} as a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        dtype_name = "BF16" if isinstance(array, Bf16) else None
        if dtype_name:
            array = array.bits
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"))
        raw = data.tobytes()
        header[name] = {"dtype": dtype_name or ST_DTYPES[array.dtype],
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """Reads a safetensors file into {name: numpy array}."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = NP_DTYPES[info["dtype"]].newbyteorder("<")
        array = np.frombuffer(blob[base + begin:base + end], dtype=dtype)
        tensors[name] = array.reshape(info["shape"])
    return tensors


def load_pb(path, value_info=None):
    """Reads one TensorProto file as a numpy array; a Bf16 when the tensor or
    the graph input/output `value_info` it is for is bfloat16 (ONNX 1.12
    stores those test tensors as uint16 bits)."""
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    array = numpy_helper.to_array(tensor)
    bf16 = onnx.TensorProto.BFLOAT16
    if tensor.data_type == bf16 or (
            value_info is not None
            and value_info.type.tensor_type.elem_type == bf16):
        return Bf16(array.astype(np.uint16))
    return array


def ops_of(model):
    """The op types of the model's nodes."""
    return [node.op_type for node in model.graph.node]


def compare(out_name, got, want):
    """None when `got` matches the expected `want`, else why not: integers
    and booleans exactly and with the same dtype, floats (written as F32 or
    F64 whatever their ONNX type) with numpy.allclose(rtol 1e-5, atol 1e-6)."""
    if isinstance(want, Bf16):
        want = want.to_float32()
    if got.shape != want.shape:
        return (f"output '{out_name}' has shape {list(got.shape)}, "
                f"expected {list(want.shape)}")
    if want.dtype.kind in "biu":
        if got.dtype != want.dtype:
            return (f"output '{out_name}' has dtype {got.dtype}, "
                    f"expected {want.dtype}")
        if not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
            return (f"output '{out_name}' is {got.ravel()[:8].tolist()}..., "
                    f"expected {want.ravel()[:8].tolist()}...")
        return None
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    if not np.allclose(got64, want64, rtol=1e-5, atol=1e-6, equal_nan=True):
        with np.errstate(invalid="ignore"):
            diff = np.nanmax(np.abs(got64 - want64))
        return f"output '{out_name}' differs (max abs diff {diff:.3g})"
    return None


def run_test(name, data_dir, otc_run, work_dir):
    """Runs one node test; returns None when it passes, else why it failed."""
    test_dir = os.path.join(data_dir, name)
    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path)
    graph = model.graph
    initializer_names = {init.name for init in graph.initializer}
    graph_inputs = [i for i in graph.input if i.name not in initializer_names]
    data_dir0 = os.path.join(test_dir, "test_data_set_0")
    inputs = {v.name: load_pb(os.path.join(data_dir0, f"input_{i}.pb"), v)
              for i, v in enumerate(graph_inputs)}
    expected = {v.name: load_pb(os.path.join(data_dir0, f"output_{i}.pb"), v)
                for i, v in enumerate(graph.output)}

    # Shape-like inputs become initializers holding the test's values.
    changed = False
    ops = ops_of(model)
    if len(ops) == 1:
        node = graph.node[0]
        for position in CONST_INPUTS.get(ops[0], []):
            if position >= len(node.input) or node.input[position] not in inputs:
                continue
            input_name = node.input[position]
            graph.initializer.append(
                numpy_helper.from_array(inputs.pop(input_name), input_name))
            kept = [i for i in graph.input if i.name != input_name]
            del graph.input[:]
            graph.input.extend(kept)
            changed = True
    dropped = DROPPED_OUTPUTS.get(name[len("test_"):], ([], ""))[0]
    if dropped:
        kept = [o for o in graph.output if o.name not in dropped]
        del graph.output[:]
        graph.output.extend(kept)
        expected = {k: v for k, v in expected.items() if k not in dropped}
        changed = True
    if name[len("test_"):] in OPSET_BUMP:
        for opset in model.opset_import:
            if opset.domain in ("", "ai.onnx"):
                opset.version = 13
        changed = True
    if changed:
        model_path = os.path.join(work_dir, name + ".onnx")
        onnx.save(model, model_path)

    in_path = os.path.join(work_dir, name + ".in.safetensors")
    out_path = os.path.join(work_dir, name + ".out.safetensors")
    write_safetensors(in_path, inputs)
    proc = subprocess.run([otc_run, model_path, "--inputs", in_path,
                           "--outputs", out_path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return message[0] if message else f"exit status {proc.returncode}"
    actual = read_safetensors(out_path)
    for out_name, want in expected.items():
        if out_name not in actual:
            return f"output '{out_name}' is missing"
        error = compare(out_name, actual[out_name], want)
        if error:
            return error
    return None


def unlisted_tests(data_dir):
    """Node tests of the OPS in `data_dir` that TESTS_BY_OP does not list:
    one-node models of those ops and the "_expanded" forms of such tests."""
    single = set()
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name, "model.onnx")
        if not os.path.isfile(path):
            continue
        ops = ops_of(onnx.load(path))
        if len(ops) == 1 and ops[0] in OPS:
            single.add(name)
    expanded = {name for name in os.listdir(data_dir)
                if name.endswith("_expanded")
                and name[:-len("_expanded")] in single}
    return sorted((single | expanded) - set(ALL_TESTS))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otc-run", default="otc-run",
                        help="the otc-run binary (default: from PATH)")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help="directory of the ONNX node tests")
    parser.add_argument("--pending", action="store_true",
                        help="also run the PENDING_IMPORTER tests (reported "
                             "as PENDING-PASS / PENDING-FAIL, not failures)")
    parser.add_argument("tests", nargs="*",
                        help="run only these tests (default: all)")
    args = parser.parse_args()
    if not os.path.isdir(args.data):
        print(f"error: no ONNX node tests at {args.data} "
              "(install libonnx-testdata)")
        return 1
    overlap = set(EXCLUDED) & set(PENDING_IMPORTER)
    unknown = (set(EXCLUDED) | set(PENDING_IMPORTER)) - set(ALL_TESTS)
    if overlap or unknown:
        print(f"error: listed twice {sorted(overlap)}, "
              f"not in TESTS_BY_OP {sorted(unknown)}")
        return 1

    passed = failed = excluded = pending = 0
    for name in unlisted_tests(args.data):
        if not args.tests or name in args.tests:
            print(f"{name} UNLISTED (a test of {OPS} missing from TESTS_BY_OP)")
            failed += 1
    with tempfile.TemporaryDirectory() as work_dir:
        for name in sorted(ALL_TESTS):
            if args.tests and name not in args.tests:
                continue
            if name in EXCLUDED:
                print(f"{name} EXCLUDED ({EXCLUDED[name]})")
                excluded += 1
                continue
            if name in PENDING_IMPORTER and not args.pending:
                print(f"{name} PENDING ({PENDING_IMPORTER[name]})")
                pending += 1
                continue
            try:
                error = run_test(name, args.data, args.otc_run, work_dir)
            except Exception as e:  # A broken test file is a failure too.
                error = f"{type(e).__name__}: {e}"
            if name in PENDING_IMPORTER:
                pending += 1
                print(f"{name} PENDING-PASS" if error is None
                      else f"{name} PENDING-FAIL ({error})")
            elif error is None and name[len("test_"):] in DROPPED_OUTPUTS:
                outputs, why = DROPPED_OUTPUTS[name[len("test_"):]]
                print(f"{name} PASS (without {', '.join(outputs)}: {why})")
                passed += 1
            elif error is None:
                print(f"{name} PASS")
                passed += 1
            else:
                print(f"{name} FAIL ({error})")
                failed += 1
    print(f"{passed} passed, {failed} failed, {excluded} excluded, "
          f"{pending} pending importer")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
