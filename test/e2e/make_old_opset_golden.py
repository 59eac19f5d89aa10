#!/usr/bin/env python3
"""Generates the golden data of the old-opset end-to-end test into
test/e2e/old-opset12/: model.onnx, a tiny seeded float32 model exported by
torch.onnx.export at opset 12 (training mode, dynamic batch, no constant
folding) whose graph the importer reads only after libonnx's version
converter has upgraded it to opset 13: token embedding, a head split through
a Reshape whose target is computed from Shape/Gather/Unsqueeze/Concat (opset
11 Unsqueeze with an axes attribute), Transpose, LayerNorm in primitives,
GELU, a Softmax-12 over axis 2 of a rank-3 value (whose rank only that
computed Reshape gives) and a cross-entropy with class weights and
ignore_index -1 (SoftmaxCrossEntropyLoss-12); batch.safetensors (idx,
targets: I64 [4, 6]) and grads.safetensors (loss and grad/<initializer> for
every parameter, computed by torch in float64 from the same float32 weights).

Run with Debian's /usr/bin/python3 (torch 1.13, onnx 1.12, numpy); the output
is deterministic for a given torch version.
"""
import copy
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

OUT = os.path.join(HERE, "old-opset12")
VOCAB = 11
SEQ = 6
BATCH = 4


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 8)
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, VOCAB)
        self.register_buffer("class_weight", torch.linspace(0.5, 1.5, VOCAB))

    def forward(self, idx, targets):
        b, t = idx.shape
        h = self.emb(idx)
        h = h.view(b, t, 2, 4).transpose(1, 2).reshape(b, t, 8)
        h = F.gelu(self.fc(self.ln(h)))
        h = h.softmax(-1) * h
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1),
                               weight=self.class_weight, ignore_index=-1)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = Model()
    model.train()
    gen = torch.Generator().manual_seed(1234)
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    targets[0, 1] = targets[2, 4] = -1

    path = os.path.join(OUT, "model.onnx")
    torch.onnx.export(model, (idx, targets), path,
                      input_names=["idx", "targets"], output_names=["loss"],
                      dynamic_axes={"idx": {0: "batch"}, "targets": {0: "batch"}},
                      opset_version=12,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    print("ops:", sorted({n.op_type for n in proto.graph.node}))
    names = {init.name for init in proto.graph.initializer}
    params = dict(model.named_parameters())
    missing = sorted(set(params) - names)
    if missing:
        sys.exit(f"parameters not exported under their names: {missing}")

    st_io.write(os.path.join(OUT, "batch.safetensors"),
                {"idx": idx.numpy(), "targets": targets.numpy()})
    ref = copy.deepcopy(model).double()
    loss = ref(idx, targets)
    loss.backward()
    golden = {"loss": np.array(loss.item(), dtype=np.float64)}
    for name, p in ref.named_parameters():
        golden["grad/" + name] = p.grad.numpy().astype(np.float64)
    st_io.write(os.path.join(OUT, "grads.safetensors"), golden)
    print(f"loss {loss.item():.12f}; wrote", ", ".join(sorted(os.listdir(OUT))))


if __name__ == "__main__":
    main()
