"""Writes long ONNX training graphs for timing the planner at scale.

Two shapes, each sized by its ONNX node count (within one repeat):

  chain  x -> [MatMul W_i -> Add b_i -> Tanh] * k -> ReduceMean: one long
         chain of small dense layers (3 nodes each), the loss its mean;
  gpt    a GPT-2-shaped stack (bench/make_gpt2_onnx.py) of many narrow
         layers (width 16, 2 heads, vocab 64, sequence 8), 32 nodes each.

    make_long_onnx.py OUT.onnx --kind chain|gpt --nodes N [--width W]

Prints the node count it wrote. Runs with any python that has onnx and numpy.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain(out, nodes, width):
    k = max(1, (nodes - 1) // 3)
    rng = np.random.default_rng(0)
    inits, graph_nodes = [], []
    x = "x"
    for i in range(k):
        w = rng.standard_normal((width, width)).astype(np.float32) / np.sqrt(width)
        b = np.zeros(width, np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array(b, f"b{i}")]
        graph_nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Tanh", [f"a{i}"], [f"t{i}"], name=f"tanh{i}"),
        ]
        x = f"t{i}"
    graph_nodes.append(helper.make_node("ReduceMean", [x], ["loss"],
                                        name="loss", keepdims=0))
    graph = helper.make_graph(
        graph_nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, out)
    return len(graph_nodes)


def gpt(out, nodes):
    # make_gpt2_onnx.py writes 21 nodes plus 32 per layer with the erf GELU.
    layers = max(1, round((nodes - 21) / 32))
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "make_gpt2_onnx.py"), out,
                    "--layers", str(layers), "--embd", "16", "--heads", "2",
                    "--vocab", "64", "--seq", "8", "--gelu", "erf"],
                   check=True, stdout=subprocess.DEVNULL)
    return len(onnx.load(out, load_external_data=False).graph.node)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kind", choices=["chain", "gpt"], default="chain")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--width", type=int, default=8)
    a = ap.parse_args()
    n = chain(a.out, a.nodes, a.width) if a.kind == "chain" else gpt(a.out, a.nodes)
    print(f"wrote {a.out}: {a.kind}, {n} nodes")


if __name__ == "__main__":
    main()
