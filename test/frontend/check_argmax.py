#!/usr/bin/env python3
"""ArgMax and ArgMin of integers (the importer compares them as float32,
exact within +-2^24): writes the models, runs otc-run where the import is
accepted and compares with numpy's argmax/argmin (ties to the first, as
ONNX's select_last_index = 0 and PyTorch).

  clip_eos:  CLIP's text pooling, argmax(-1) of int32(ids == eos), no keepdims
  ids:       argmin(1) of the int64 graph input itself, keepdims (bounded:
             the plan's otc.index_bounds holds ids < 2^24, which train checks)
  float_ties: argmax(0) of a float input with ties (the first wins)

Prints `NAME PASS` or `NAME FAIL (why)`, then writes the refused models
(big_constant: a constant past 2^24; computed: ids + ids) for the RUN lines.

    check_argmax.py OTC_RUN WORK
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h


def save(path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = v.tobytes()
        dt = {np.dtype("int64"): "I64", np.dtype("float32"): "F32"}[v.dtype]
        header[k] = {"dtype": dt, "shape": list(v.shape),
                     "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        dt = {"I64": np.int64, "F32": np.float32, "F64": np.float64}[v["dtype"]]
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dt).reshape(v["shape"])
    return out


def main():
    otc_run, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, (3, 6)).astype(np.int64)
    ids[0, 2] = ids[0, 4] = 49   # two eos: the first wins
    ids[1, 5] = 49
    ids[2, :] = 7                # no eos: all zero, index 0
    ids[2, 3] = 7
    floats = np.array([[1.0, 5.0, 2.0], [5.0, 5.0, 3.0], [0.5, 5.0, 3.0]],
                      np.float32)
    eos = h.make_tensor("eos", T.INT64, [], [49])
    cases = {
        "clip_eos": ([h.make_node("Equal", ["ids", "eos"], ["m"]),
                      h.make_node("Cast", ["m"], ["mi"], to=T.INT32),
                      h.make_node("ArgMax", ["mi"], ["y"], axis=-1,
                                  keepdims=0)],
                     [h.make_tensor_value_info("ids", T.INT64, [3, 6])],
                     [h.make_tensor_value_info("y", T.INT64, [3])], [eos],
                     {"ids": ids}, np.argmax((ids == 49).astype(np.int32),
                                             axis=-1)),
        "ids": ([h.make_node("ArgMin", ["ids"], ["y"], axis=1)],
                [h.make_tensor_value_info("ids", T.INT64, [3, 6])],
                [h.make_tensor_value_info("y", T.INT64, [3, 1])], [],
                {"ids": ids}, np.argmin(ids, axis=1)[:, None]),
        "float_ties": ([h.make_node("ArgMax", ["x"], ["y"], axis=0)],
                       [h.make_tensor_value_info("x", T.FLOAT, [3, 3])],
                       [h.make_tensor_value_info("y", T.INT64, [1, 3])], [],
                       {"x": floats}, np.argmax(floats, axis=0)[None, :]),
    }
    for name, (nodes, ins, outs, inits, feed, want) in cases.items():
        model = os.path.join(work, name + ".onnx")
        save(model, nodes, ins, outs, inits)
        write_safetensors(os.path.join(work, name + ".in"), feed)
        r = subprocess.run([otc_run, model, "--inputs",
                            os.path.join(work, name + ".in"), "--outputs",
                            os.path.join(work, name + ".out")],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name} FAIL ({r.stderr.strip()})")
            continue
        got = read_safetensors(os.path.join(work, name + ".out"))["y"]
        ok = got.shape == want.shape and np.array_equal(got, want)
        print(f"{name} {'PASS' if ok else f'FAIL (got {got.tolist()}, want {want.tolist()})'}")
    big = h.make_tensor("big", T.INT64, [3], [1, 1 << 25, 2])
    save(os.path.join(work, "big_constant.onnx"),
         [h.make_node("Add", ["x", "big"], ["s"]),
          h.make_node("ArgMax", ["big"], ["y"], axis=0)],
         [h.make_tensor_value_info("x", T.INT64, [3])],
         [h.make_tensor_value_info("y", T.INT64, [1])], [big])
    save(os.path.join(work, "computed.onnx"),
         [h.make_node("Add", ["ids", "ids"], ["s"]),
          h.make_node("ArgMax", ["s"], ["y"], axis=1)],
         [h.make_tensor_value_info("ids", T.INT64, [3, 6])],
         [h.make_tensor_value_info("y", T.INT64, [3, 1])])


if __name__ == "__main__":
    main()
