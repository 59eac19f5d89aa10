"""What the dev-time golden generators share after torch.onnx.export."""
import os

import onnx


def save_inline(path):
    """Rewrites the export at `path` with its weights inline (the external
    `path.data` removed) and without the nodes' stack traces (absolute paths
    and line numbers of the machine that exported it)."""
    m = onnx.load(path)
    for n in m.graph.node:
        keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    onnx.save(m, path)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    return m
