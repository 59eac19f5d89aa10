#!/usr/bin/env python3
"""Generates the golden data of the MLP end-to-end test into test/e2e/mlp/:
mlp.onnx (a seeded 16-32-32-10 MLP whose graph computes the mean
cross-entropy loss, exported by torch in training mode), init.safetensors
(its float32 initializers), batch.safetensors (x [8,16] float32, y [8] int64)
and grads.safetensors (loss and grad/<initializer> computed by torch in
float64 from the same float32 weights). Run with /usr/bin/python3 (torch 1.13,
onnx 1.12, numpy); it prints the exported graph so the op set is visible."""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

OUT = os.path.join(HERE, "mlp")
BATCH = 8


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 10)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))
        h = torch.relu(self.fc2(h))
        return F.cross_entropy(self.fc3(h), y)


def describe(model_proto):
    """Prints inputs, outputs, initializers and nodes of the ONNX graph."""
    g = model_proto.graph

    def dims(t):
        return [d.dim_param or d.dim_value for d in t.type.tensor_type.shape.dim]

    print("opset:", [(o.domain or "ai.onnx", o.version) for o in model_proto.opset_import])
    for i in g.input:
        print("input ", i.name, onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type), dims(i))
    for o in g.output:
        print("output", o.name, onnx.TensorProto.DataType.Name(o.type.tensor_type.elem_type), dims(o))
    for t in g.initializer:
        print("init  ", t.name, onnx.TensorProto.DataType.Name(t.data_type), list(t.dims))
    for n in g.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
        print("node  ", n.op_type, repr(n.name), list(n.input), "->", list(n.output), attrs)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = MLP()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 16, generator=gen, dtype=torch.float32)
    y = torch.randint(0, 10, (BATCH,), generator=gen, dtype=torch.int64)

    onnx_path = os.path.join(OUT, "mlp.onnx")
    torch.onnx.export(model, (x, y), onnx_path, input_names=["x", "y"],
                      output_names=["loss"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    proto = onnx.load(onnx_path)
    onnx.checker.check_model(proto)
    describe(proto)

    # The golden data must be keyed by ONNX initializer names: map each
    # initializer back to its torch parameter by value (names normally agree).
    params = dict(model.named_parameters())
    mapping = {}
    for init in proto.graph.initializer:
        value = numpy_helper.to_array(init)
        if init.name in params:
            mapping[init.name] = init.name
            continue
        hits = [n for n, p in params.items()
                if tuple(p.shape) == value.shape and np.array_equal(p.detach().numpy(), value)]
        if len(hits) != 1:
            sys.exit(f"cannot map ONNX initializer {init.name!r} to a torch parameter")
        mapping[init.name] = hits[0]
    if any(k != v for k, v in mapping.items()):
        print("initializer renames:", {k: v for k, v in mapping.items() if k != v})
    if sorted(mapping.values()) != sorted(params):
        sys.exit("not every torch parameter is an ONNX initializer")

    st_io.write(os.path.join(OUT, "init.safetensors"),
                {name: params[src].detach().numpy().astype(np.float32)
                 for name, src in mapping.items()})
    st_io.write(os.path.join(OUT, "batch.safetensors"),
                {"x": x.numpy(), "y": y.numpy()})

    # Float64 reference from the same float32 weights.
    ref = MLP().double()
    ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    loss = ref(x.double(), y)
    loss.backward()
    ref_params = dict(ref.named_parameters())
    golden = {"loss": np.array(loss.item(), dtype=np.float64)}
    for name, src in mapping.items():
        golden["grad/" + name] = ref_params[src].grad.numpy().astype(np.float64)
    st_io.write(os.path.join(OUT, "grads.safetensors"), golden)
    print(f"loss (float64) = {loss.item():.12f}")
    print("wrote", ", ".join(sorted(os.listdir(OUT))))


if __name__ == "__main__":
    main()
