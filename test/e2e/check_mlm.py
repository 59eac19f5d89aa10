"""Checks one step of `train --data SHARD --mlm MASK_ID --no-shuffle
--dump-grads DUMP` against the masked-LM definition and the reference
interpreter.

    check_mlm.py MODEL --prog DIR --shard SHARD --dump DUMP --mask-id ID
        --rows N --vocab V [--work DIR]

The dump holds the micro-batches train fed (input/<tokens>, input/<targets>,
N rows in all, read in order: row r is tokens [r T, (r + 1) T) of the
shard). Masking: where a target is -100 the input is the shard's token;
elsewhere the target is the shard's token and the input the mask token, the
token itself or another in [0, V). Prints the counts and PASS or FAIL.
Loss and gradients: the model's @train_step at micro-batch N, run by
otc-run in float64 on the fed rows (an all-ones attention mask beside them)
with the program's initial parameters, gives the dump's mean loss and
gradients within 1e-5 (relative, per tensor; one zero in exact arithmetic,
within 1e-6).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

IGNORE = -100
NP_OF = {onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
         onnx.TensorProto.BOOL: np.bool_, onnx.TensorProto.FLOAT: np.float32}


def read_shard(path):
    """The tokens of an llm.c shard (256 int32 header; version 1 uint16,
    version 2 uint32)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    if magic != 20240520:
        sys.exit(f"{path}: bad magic {magic}")
    dtype = np.uint16 if version == 1 else np.uint32
    return np.frombuffer(data[1024:], dtype=dtype, count=count).astype(np.int64)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def check_masking(shard, tokens, targets, mask_id, bound):
    rows, T = tokens.shape
    original = shard[:rows * T].reshape(rows, T)
    plain = targets == IGNORE
    chosen = ~plain
    ok = bool(np.all(tokens[plain] == original[plain]))
    ok &= bool(np.all(targets[chosen] == original[chosen]))
    ok &= bool(np.all((tokens >= 0) & ((tokens < bound) | (tokens == mask_id))))
    masked = int(np.sum(tokens[chosen] == mask_id))
    kept = int(np.sum(tokens[chosen] == original[chosen]))
    other = int(chosen.sum()) - masked - kept
    print(f"masking: {int(chosen.sum())} of {rows * T} positions chosen "
          f"({masked} masked, {kept} kept, {other} replaced): "
          f"{'PASS' if ok and masked > 0 else 'FAIL'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--prog", required=True)
    ap.add_argument("--shard", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--mask-id", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="otc-mlm-")
    os.makedirs(work, exist_ok=True)

    dump = st_io.read(a.dump)
    graph = onnx.load(a.model, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in inits]
    fed = {n[len("input/"):]: np.asarray(v) for n, v in dump.items()
           if n.startswith("input/")}
    if len(fed) != 2:
        sys.exit(f"{a.dump}: expected two fed inputs, found {sorted(fed)}")
    # The targets are the loss's input (--loss adds it), the tokens the
    # graph's.
    (tokens_name,) = [vi.name for vi in inputs if vi.name in fed]
    (targets_name,) = [n for n in fed if n != tokens_name]
    tokens, targets = fed[tokens_name], fed[targets_name]
    if tokens.shape[0] != a.rows:
        sys.exit(f"{a.dump}: {tokens.shape[0]} rows, expected {a.rows}")
    check_masking(read_shard(a.shard), tokens, targets, a.mask_id, a.vocab)

    # The interpreter on the same rows, one micro-batch of them all.
    batch = {tokens_name: tokens, targets_name: targets}
    for vi in inputs:
        if vi.name not in batch:
            shape = list(tokens.shape)
            batch[vi.name] = np.ones(shape, NP_OF[vi.type.tensor_type.elem_type])
    step = os.path.join(work, "step.mlir")
    with open(step, "w") as f:
        f.write(run(["otc-compile", a.model, "--micro-batch", str(a.rows),
                     f"--loss=cross_entropy:logits:{targets_name}",
                     "--compile-to=differentiate"]))
    tensors = dict(st_io.read(os.path.join(a.prog, "init.safetensors")))
    tensors.update(batch)
    ins, outs = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    st_io.write(ins, tensors)
    run(["otc-run", step, "--func", "train_step", "--inputs", ins,
         "--outputs", outs, "--f64"])
    ref = st_io.read(outs)
    loss, want = float(np.asarray(dump["loss"])), float(np.asarray(ref["loss"]))
    ok = abs(loss - want) <= 1e-5 * abs(want)
    print(f"loss: program {loss:.6f}, interpreter {want:.6f}: {'PASS' if ok else 'FAIL'}")
    names = sorted(n for n in dump if n.startswith("grad/"))
    # A gradient zero in exact arithmetic (a key's bias: softmax does not
    # see it) is rounding noise in both: within 1e-6.
    def near(n):
        got, want = np.asarray(dump[n], np.float64), np.asarray(ref[n], np.float64)
        rn, gn = np.linalg.norm(want), np.linalg.norm(got)
        return (rn <= 1e-6 and gn <= 1e-6) or \
            np.linalg.norm(got - want) <= 1e-5 * max(rn, 1e-30)
    bad = [n for n in names if n not in ref or not near(n)]
    print(f"gradients: {len(names) - len(bad)} of {len(names)} within 1e-5: "
          f"{'PASS' if names and not bad else 'FAIL ' + ' '.join(bad)}")


if __name__ == "__main__":
    main()
