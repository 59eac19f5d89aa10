#!/usr/bin/env python3
"""Writes one random global batch per codegen test model (test/codegen/Inputs)
for the GPU tests (test/gpu/build.sh): floats from N(0, 1), integers uniform
below each input's bound, the leading (batch) dimension as the build script
compiles the model (micro-batch x grad-accum). Deterministic (fixed seed).

    make_batches.py OUTDIR          numpy and onnx
"""
import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import st_io  # noqa: E402

# model: (global batch, integer bounds), matching test/gpu/build.sh and the
# bounds of the vs-interp tests.
MODELS = {
    "attention_gqa": (4, {"y": 5}),
    "attention": (4, {"y": 4}),
    "layernorm_gelu": (4, {"y": 5}),
    "embedding": (4, {"tokens": 11, "targets": 11}),
    "rotary": (3, {"y": 3}),
    "dropout": (4, {"y": 4}),
    "trig": (4, {"y": 3}),
    "routing": (4, {"y": 3}),
    "scatter": (4, {"y": 3}),
    "conv": (4, {"y": 3}),
}

DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
          onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2026)
    for name, (batch, bounds) in MODELS.items():
        model = onnx.load(os.path.join(HERE, "..", "codegen", "Inputs", name + ".onnx"))
        inits = {i.name for i in model.graph.initializer}
        tensors = {}
        for inp in model.graph.input:
            if inp.name in inits:
                continue
            t = inp.type.tensor_type
            shape = [batch if i == 0 else d.dim_value
                     for i, d in enumerate(t.shape.dim)]
            dtype = DTYPES[t.elem_type]
            if dtype == np.float32:
                tensors[inp.name] = rng.standard_normal(shape).astype(dtype)
            elif dtype == np.bool_:
                tensors[inp.name] = rng.integers(0, 2, shape).astype(dtype)
            else:
                tensors[inp.name] = rng.integers(0, bounds[inp.name], shape).astype(dtype)
        st_io.write(os.path.join(out, name + ".safetensors"), tensors)


if __name__ == "__main__":
    main()
