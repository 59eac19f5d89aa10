#!/usr/bin/env python3
"""A model with a trained one-element parameter, as CLIP's logit_scale:
logits = (x W) * exp(logit_scale), logit_scale a 0-d initializer (2.0),
and a batch for it (x [2, 4], targets [2]).

    make_scalar_param.py OUT.onnx BATCH.safetensors [--signature]

With --signature the graph also carries the dynamo exporter's graph
signature naming both initializers as PARAMETERs, as an export of the
module would (onnx >= 1.16, the dev venv's: metadata_props on a graph);
test/e2e/scalar-param/signature.onnx is that output, checked in.
"""
import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper


def main():
    out, batch = sys.argv[1:3]
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "model.proj.weight")
    s = numpy_helper.from_array(np.array(2.0, np.float32), "model.logit_scale")
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "model.proj.weight"], ["z"]),
         h.make_node("Exp", ["model.logit_scale"], ["e"]),
         h.make_node("Mul", ["z", "e"], ["logits"])],
        "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
        [h.make_tensor_value_info("logits", T.FLOAT, [2, 3])], [w, s])
    if "--signature" in sys.argv:
        p = g.metadata_props.add()
        p.key = "pkg.torch.export.ExportedProgram.graph_signature"
        p.value = ("\n# inputs\np_model_proj_weight: PARAMETER "
                   "target='model.proj.weight'\np_model_logit_scale: PARAMETER "
                   "target='model.logit_scale'\nx: USER_INPUT\n\n# outputs\n"
                   "logits: USER_OUTPUT\n")
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8  # opset 17's, what older onnx releases check
    onnx.save(model, out)
    x = rng.normal(size=(2, 4)).astype(np.float32).tobytes()
    t = np.array([0, 2], np.int64).tobytes()
    head = {"x": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, len(x)]},
            "targets": {"dtype": "I64", "shape": [2],
                        "data_offsets": [len(x), len(x) + len(t)]}}
    text = json.dumps(head).encode()
    with open(batch, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + x + t)


if __name__ == "__main__":
    main()
