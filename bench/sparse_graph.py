"""The ONNX graph writer of the shaped benchmark models (make_gpt2_onnx.py,
make_llama_onnx.py): FP32 initializers as ONNX external data, constants as
Constant nodes (as exporters write them: not initializers, so not
parameters), ops named "/<Op>_<n>" as PyTorch's exporter names them, and the
training graph of tokens `idx` and `targets` [batch, T] to a scalar `loss`,
opset 17.

The weights file is dense by default, as a model a user exports is: each
initializer of two or more dimensions N(0, 0.02) from a seeded generator,
1-D ones named `*.bias` zeros and other 1-D ones (norm gains) ones, so that
the importer's per-value work (ties, merged parameters, the decoding) costs
what it costs on a real export. weights="sparse" writes a sparse file of
zeros instead (only shapes matter for planning; no disk, no time to write),
which hides that cost: benchmarks of compile time use the dense form.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class SparseGraph:
    def __init__(self, out, weights="dense", seed=0):
        if weights not in ("dense", "sparse"):
            raise ValueError(f"weights must be dense or sparse, not {weights!r}")
        self.out = out
        self.weights_path = out + ".weights"
        self.dense = weights == "dense"
        self.seed = seed
        self.inits, self.nodes = [], []
        self.offset = 0
        self.count = 0

    def weight(self, name, shape):
        """An FP32 initializer of `shape` in the weights file; its name."""
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * 4
        for k, val in (("location", os.path.basename(self.weights_path)),
                       ("offset", str(self.offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, val
        self.offset += length
        self.inits.append(t)
        return name

    def const(self, name, array):
        """A Constant node holding `array`; its output's name."""
        self.nodes.append(helper.make_node(
            "Constant", [], [name], name="/" + name,
            value=numpy_helper.from_array(array, name)))
        return name

    def node(self, op, inputs, **attrs):
        """One `op` node; its output's name."""
        self.count += 1
        out = f"{op.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out],
                                           name=f"/{op}_{self.count}", **attrs))
        return out

    def node_outputs(self, op, inputs, n, **attrs):
        """One `op` node with `n` outputs; their names."""
        self.count += 1
        outs = [f"{op.lower()}_{self.count}_{i}" for i in range(n)]
        self.nodes.append(helper.make_node(op, inputs, outs,
                                           name=f"/{op}_{self.count}", **attrs))
        return outs

    def write_weights(self):
        """The weights file: dense values (see the module's comment) or a
        sparse file of zeros of the same length."""
        with open(self.weights_path, "wb") as f:
            if not self.dense:
                f.truncate(self.offset)
                return
            rng = np.random.default_rng(self.seed)
            chunk = 1 << 24
            for t in self.inits:
                n = int(np.prod(t.dims))
                if len(t.dims) == 1:
                    value = 0.0 if t.name.endswith(".bias") else 1.0
                    np.full(n, value, dtype=np.float32).tofile(f)
                    continue
                for start in range(0, n, chunk):
                    m = min(chunk, n - start)
                    (rng.standard_normal(m, dtype=np.float32) * np.float32(0.02)).tofile(f)

    def save(self, graph_name, T):
        """Writes the model (inputs idx and targets [batch, T], output loss)
        and its weights file; returns the parameter count."""
        graph = helper.make_graph(
            self.nodes, graph_name,
            [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", T]),
             helper.make_tensor_value_info("targets", TensorProto.INT64,
                                           ["batch", T])],
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
            initializer=self.inits)
        model = helper.make_model(graph,
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, self.out)
        self.write_weights()
        return self.offset // 4
