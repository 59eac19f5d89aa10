#!/usr/bin/env python3
"""Mutation campaign: bad ONNX models must give one clean error line.

Mutates the test models (byte-level: truncations, byte flips, zeroed ranges,
inserted bytes; semantic: duplicate outputs, dangling inputs, huge dims, bad
external data, wrong types, unknown attributes, ...), runs `otc-compile` and
`otc-run` on every variant and classifies each run:

  clean error     exit != 0, exactly one line on stderr, no signal
  valid           exit 0 on a byte-level or value edit that still parses and
                  validates ("valid after mutation": fine)
  crash           killed by a signal, an abort, a sanitizer or LLVM error
                  report, a stack dump
  hang            still running after --timeout seconds
  silent success  exit 0 on a semantic edit known to make the model invalid
  multi-line      exit != 0 with more than one line on stderr

It prints one table row per mutation kind and exits 1 when any run crashed,
hung, succeeded silently or printed several lines. Every variant is
reproducible from (--seed, its index): `--keep` leaves them in --work.

    mutate-campaign.py [--bin BUILD/bin] --src SRC_ROOT --work DIR
                       [--variants N] [--seed S] [--jobs J] [--timeout T]
                       [--round-robin] [--keep] [--verbose]

otc-compile runs with CXX=true: everything up to building the program (the
import, every pass, code generation, plan.json, init.safetensors) runs, the
host compiler does not. otc-run runs the reference interpreter on inputs
drawn for the unmutated model (inputs of the wrong shape or dtype are a clean
error too). Both run under a 8 GiB address-space limit: a tool that would
allocate more counts as a crash.
"""
import argparse
import collections
import concurrent.futures
import copy
import os
import random
import resource
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
import st_io  # noqa: E402

# The base models (paths under the source root): small, covering opsets 13 to
# 20, external data, sequences, losses and a whole GPT.
BASE_MODELS = [
    "test/frontend/Inputs/mlp.onnx",
    "test/frontend/Inputs/external.onnx",
    "test/frontend/Inputs/ops.onnx",
    "test/frontend/Inputs/elementwise.onnx",
    "test/frontend/Inputs/shape_ops.onnx",
    "test/frontend/Inputs/gpt_reshape.onnx",
    "test/frontend/Inputs/reduce18.onnx",
    "test/frontend/Inputs/split18.onnx",
    "test/frontend/Inputs/sequence18.onnx",
    "test/frontend/Inputs/layernorm17.onnx",
    "test/frontend/Inputs/gelu20.onnx",
    "test/frontend/Inputs/losses.onnx",
    "test/frontend/Inputs/dropout.onnx",
    "test/e2e/mlp/mlp.onnx",
    "test/e2e/gpt2-opset14/gpt2.onnx",
]
DIMS = {"batch": 2, "seq": 4, "s0": 2}
SIDE_FILES = {"test/frontend/Inputs/external.onnx": ["external.weights"]}

BYTE_KINDS = ["truncate", "flip-bytes", "zero-range", "insert-bytes"]
# Semantic edits that always make the model invalid ("must fail").
MUST_FAIL_KINDS = [
    "two-writers", "output-is-input", "output-is-initializer",
    "duplicate-initializer", "duplicate-output", "dangling-input",
    "huge-input-dim", "huge-initializer-dims", "external-outside",
    "external-absolute", "external-device", "external-past-end",
    "unsupported-input-type", "declared-output-type", "unknown-attribute",
    "out-of-order", "unknown-op", "missing-input",
]
# Semantic edits that may leave a valid model.
MAY_PASS_KINDS = ["attribute-value", "input-dim", "initializer-values"]
KINDS = BYTE_KINDS + MUST_FAIL_KINDS + MAY_PASS_KINDS

CLASSES = ["clean error", "valid", "crash", "hang", "silent success",
           "multi-line"]
BAD = {"crash", "hang", "silent success", "multi-line"}


class NotApplicable(Exception):
    """The mutation does not apply to this model (e.g. no initializer)."""


def bind(shape):
    out = []
    for d in shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        else:
            out.append(DIMS.get(d.dim_param, 2))
    return out


def make_inputs(model, path, rng):
    """Random inputs for the graph inputs that are not initializers."""
    inits = {i.name for i in model.graph.initializer}
    tensors = {}
    np_types = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64,
                TensorProto.FLOAT16: np.float16, TensorProto.INT64: np.int64,
                TensorProto.INT32: np.int32, TensorProto.BOOL: np.bool_}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = bind(tt.shape)
        dtype = np_types.get(tt.elem_type, np.float32)
        if dtype in (np.int64, np.int32):
            a = rng.integers(0, 2, size=shape).astype(dtype)
        elif dtype == np.bool_:
            a = rng.integers(0, 2, size=shape).astype(bool)
        else:
            a = rng.standard_normal(size=shape).astype(dtype)
        tensors[inp.name] = a
    st_io.write(path, tensors)


# --- mutations ----------------------------------------------------------------

def byte_mutation(kind, data, rng):
    data = bytearray(data)
    n = len(data)
    if kind == "truncate":
        return bytes(data[:rng.randrange(0, n)])
    if kind == "flip-bytes":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
        return bytes(data)
    if kind == "zero-range":
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, 64))
        data[i:j] = bytes(j - i)
        return bytes(data)
    if kind == "insert-bytes":
        i = rng.randrange(n + 1)
        ins = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        return bytes(data[:i] + ins + data[i:])
    raise ValueError(kind)


def node_outputs(m):
    return [(n, i) for n in m.graph.node for i, o in enumerate(n.output) if o]


def rename_uses(m, old, new, after_node):
    seen = False
    for n in m.graph.node:
        if n is after_node:
            seen = True
            continue
        if seen:
            for i, name in enumerate(n.input):
                if name == old:
                    n.input[i] = new
    for o in m.graph.output:
        if o.name == old:
            o.name = new


def external_init(m, rng, location):
    """Moves a float initializer's data to external data at `location`;
    returns the initializer and the bytes its shape needs."""
    floats = [i for i in m.graph.initializer if i.data_type == TensorProto.FLOAT]
    if not floats:
        raise NotApplicable
    init = rng.choice(floats)
    init.ClearField("raw_data")
    init.ClearField("float_data")
    del init.external_data[:]
    init.data_location = TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = "location", location
    return init, 4 * int(np.prod(list(init.dims), dtype=np.int64))


def semantic_mutation(kind, m, rng, vdir):
    g = m.graph
    inits = list(g.initializer)
    init_names = {i.name for i in inits}
    inputs = [i for i in g.input if i.name not in init_names]
    if kind == "two-writers":
        outs = node_outputs(m)
        if len(outs) < 2:
            raise NotApplicable
        (n1, i1), (n2, i2) = rng.sample(outs, 2)
        n2.output[i2] = n1.output[i1]
    elif kind == "output-is-input":
        if not inputs or not node_outputs(m):
            raise NotApplicable
        n, i = rng.choice(node_outputs(m))
        n.output[i] = rng.choice(inputs).name
    elif kind == "output-is-initializer":
        if not inits or not node_outputs(m):
            raise NotApplicable
        n, i = rng.choice(node_outputs(m))
        n.output[i] = rng.choice(inits).name
    elif kind == "duplicate-initializer":
        if not inits:
            raise NotApplicable
        g.initializer.append(copy.deepcopy(rng.choice(inits)))
    elif kind == "duplicate-output":
        if not g.output:
            raise NotApplicable
        g.output.append(copy.deepcopy(rng.choice(list(g.output))))
    elif kind == "dangling-input":
        cands = [(n, i) for n in g.node for i, x in enumerate(n.input) if x]
        if not cands:
            raise NotApplicable
        n, i = rng.choice(cands)
        n.input[i] = "undefined_%d" % rng.randrange(1000)
    elif kind == "huge-input-dim":
        cands = [i for i in inputs if i.type.tensor_type.shape.dim]
        if not cands:
            raise NotApplicable
        inp = rng.choice(cands)
        d = rng.choice(list(inp.type.tensor_type.shape.dim))
        d.Clear()
        d.dim_value = rng.choice([2**40, 2**50, 2**62, 2**63 - 1])
    elif kind == "huge-initializer-dims":
        if not inits:
            raise NotApplicable
        init = rng.choice(inits)
        del init.dims[:]
        init.dims.extend(rng.choice([[2**32, 2**32, 4], [2**62, 2],
                                     [2**40, 2**40], [2**63 - 1]]))
    elif kind == "external-outside":
        external_init(m, rng, rng.choice(["../" * 8 + "etc/passwd",
                                          "../outside.bin", "link.bin"]))
        os.symlink("/etc/passwd", os.path.join(vdir, "link.bin"))
    elif kind == "external-absolute":
        external_init(m, rng, rng.choice(["/etc/passwd", "/dev/zero",
                                          "/proc/self/mem"]))
    elif kind == "external-device":
        external_init(m, rng, rng.choice(["zero.bin", "fifo.bin", "."]))
        os.symlink("/dev/zero", os.path.join(vdir, "zero.bin"))
        os.mkfifo(os.path.join(vdir, "fifo.bin"))
    elif kind == "external-past-end":
        # A file one byte short of the data at offset 0, or an offset past
        # its end.
        init, needed = external_init(m, rng, "data.bin")
        offset = rng.choice([0, 1, 2**62, 2**63 - 1])
        if needed == 0:
            offset = max(offset, 1)
        entry = init.external_data.add()
        entry.key, entry.value = "offset", str(offset)
        with open(os.path.join(vdir, "data.bin"), "wb") as f:
            f.write(bytes(max(needed - 1, 0)))
    elif kind == "unsupported-input-type":
        if not inputs:
            raise NotApplicable
        rng.choice(inputs).type.tensor_type.elem_type = rng.choice(
            [TensorProto.STRING, TensorProto.INT8, TensorProto.UINT16,
             TensorProto.COMPLEX64])
    elif kind == "declared-output-type":
        if not g.output:
            raise NotApplicable
        o = rng.choice(list(g.output))
        old = o.type.tensor_type.elem_type
        choices = [t for t in (TensorProto.STRING, TensorProto.INT8,
                               TensorProto.UINT8, TensorProto.COMPLEX64) if t != old]
        o.type.tensor_type.elem_type = rng.choice(choices)
    elif kind == "unknown-attribute":
        if not g.node:
            raise NotApplicable
        n = rng.choice(list(g.node))
        n.attribute.append(helper.make_attribute("no_such_attribute_%d" %
                                                 rng.randrange(100), 1))
    elif kind == "out-of-order":
        # Move a node after one of the nodes that read its outputs.
        nodes = list(g.node)
        cands = []
        for i, n in enumerate(nodes):
            outs = {o for o in n.output if o}
            for j in range(i + 1, len(nodes)):
                if outs & set(nodes[j].input):
                    cands.append((i, j))
                    break
        if not cands:
            raise NotApplicable
        i, j = rng.choice(cands)
        moved = copy.deepcopy(nodes[i])
        del g.node[i]
        g.node.insert(j, moved)
    elif kind == "unknown-op":
        if not g.node:
            raise NotApplicable
        rng.choice(list(g.node)).op_type = rng.choice(["Foo", "Conv3DTranspose",
                                                       "relu", ""])
    elif kind == "missing-input":
        cands = [n for n in g.node if len(n.input) >= 1 and n.op_type not in
                 ("Dropout", "Constant")]
        if not cands:
            raise NotApplicable
        n = rng.choice(cands)
        del n.input[:]
    elif kind == "attribute-value":
        cands = [(n, a) for n in g.node for a in n.attribute
                 if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS,
                               onnx.AttributeProto.FLOAT)]
        if not cands:
            raise NotApplicable
        n, a = rng.choice(cands)
        vals = [-2**62, -3, -2, -1, 0, 1, 2, 3, 7, 2**31, 2**62]
        if a.type == onnx.AttributeProto.INT:
            a.i = rng.choice(vals)
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
        elif a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice(vals)
        else:
            a.ints.append(rng.choice(vals))
    elif kind == "input-dim":
        cands = [i for i in inputs if i.type.tensor_type.shape.dim]
        if not cands:
            raise NotApplicable
        d = rng.choice(list(rng.choice(cands).type.tensor_type.shape.dim))
        d.Clear()
        d.dim_value = rng.choice([0, 1, 3, 5, 7, 1000])
    elif kind == "initializer-values":
        cands = [i for i in inits if i.raw_data]
        if not cands:
            raise NotApplicable
        init = rng.choice(cands)
        raw = bytearray(init.raw_data)
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        init.raw_data = bytes(raw)
    else:
        raise ValueError(kind)


# --- running ------------------------------------------------------------------

def limit_memory():
    lim = 8 << 30
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


CRASH_MARKERS = ("Stack dump", "PLEASE submit a bug report", "LLVM ERROR",
                 "AddressSanitizer", "Assertion", "terminate called",
                 "Segmentation fault", "Aborted", "UNREACHABLE")


def classify(cmd, env, must_fail, timeout):
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return "hang", ""
    err = p.stderr.decode("utf-8", "replace")
    lines = [l for l in err.splitlines()
             if l.strip() and not l.startswith("otc-compile: building:")
             and not l.startswith("otc-compile: wrote")]
    if p.returncode < 0 or p.returncode >= 128 or any(m in err for m in CRASH_MARKERS):
        return "crash", err
    if p.returncode == 0:
        return ("silent success" if must_fail else "valid"), err
    if len(lines) != 1:
        return "multi-line", err
    return "clean error", err


def run_variant(args, index):
    rng = random.Random("%d-%d" % (args.seed, index))
    base = rng.choice(BASE_MODELS)
    kind = KINDS[index % len(KINDS)] if args.round_robin else rng.choice(KINDS)
    vdir = os.path.join(args.work, "v%05d" % index)
    shutil.rmtree(vdir, ignore_errors=True)
    os.makedirs(vdir)
    src = os.path.join(args.src, base)
    for side in SIDE_FILES.get(base, []):
        shutil.copy(os.path.join(os.path.dirname(src), side), vdir)
    model_path = os.path.join(vdir, "model.onnx")
    with open(src, "rb") as f:
        data = f.read()
    # The model may not apply to the kind: try other bases, deterministically.
    for attempt in range(len(BASE_MODELS)):
        try:
            if kind in BYTE_KINDS:
                out = byte_mutation(kind, data, rng)
            else:
                m = onnx.load_from_string(data)
                semantic_mutation(kind, m, rng, vdir)
                out = m.SerializeToString()
            break
        except NotApplicable:
            base = BASE_MODELS[(BASE_MODELS.index(base) + 1) % len(BASE_MODELS)]
            src = os.path.join(args.src, base)
            for side in SIDE_FILES.get(base, []):
                shutil.copy(os.path.join(os.path.dirname(src), side), vdir)
            with open(src, "rb") as f:
                data = f.read()
    with open(model_path, "wb") as f:
        f.write(out)
    must_fail = kind in MUST_FAIL_KINDS
    dims = []
    for k, v in DIMS.items():
        dims += ["--dim", "%s=%d" % (k, v)]
    env = dict(os.environ, CXX="true")
    results = {}
    compile_cmd = [os.path.join(args.bin, "otc-compile"), model_path, "-o",
                   os.path.join(vdir, "out")] + dims
    results["otc-compile"] = classify(compile_cmd, env, must_fail, args.timeout)
    run_cmd = [os.path.join(args.bin, "otc-run"), model_path, "--inputs",
               args.inputs[base], "--outputs", os.path.join(vdir, "run.safetensors")] + dims
    results["otc-run"] = classify(run_cmd, env, must_fail, args.timeout)
    bad = any(c in BAD for c, _ in results.values())
    if not args.keep and not bad:
        shutil.rmtree(vdir, ignore_errors=True)
    return index, base, kind, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="directory of otc-compile and otc-run "
                    "(default: where PATH finds otc-compile)")
    ap.add_argument("--src", required=True, help="source root (the test models)")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--round-robin", action="store_true",
                    help="cycle through the mutation kinds instead of drawing them")
    ap.add_argument("--keep", action="store_true", help="keep every variant")
    ap.add_argument("--verbose", action="store_true",
                    help="print every run's class and first error line")
    args = ap.parse_args()
    if not args.bin:
        found = shutil.which("otc-compile")
        if not found:
            ap.error("otc-compile is not on PATH: pass --bin")
        args.bin = os.path.dirname(found)

    os.makedirs(args.work, exist_ok=True)
    nprng = np.random.default_rng(args.seed)
    args.inputs = {}
    for base in BASE_MODELS:
        m = onnx.load(os.path.join(args.src, base), load_external_data=False)
        path = os.path.join(args.work, base.replace("/", "_") + ".inputs.safetensors")
        make_inputs(m, path, nprng)
        args.inputs[base] = path

    table = collections.OrderedDict((k, collections.Counter()) for k in KINDS)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for index, base, kind, results in pool.map(
                lambda i: run_variant(args, i), range(args.variants)):
            for tool, (cls, err) in results.items():
                table[kind][cls] += 1
                if args.verbose:
                    print("v%05d %-40s %-22s %-11s %-14s %s" % (
                        index, base, kind, tool, cls,
                        (err.strip().splitlines() or [""])[-1][:160]))
                if cls in BAD:
                    failures.append((index, base, kind, tool, cls, err))

    width = max(len(k) for k in KINDS) + 2
    header = "mutation".ljust(width) + "".join(c.rjust(16) for c in CLASSES)
    print("%d variants (seed %d), otc-compile and otc-run on each" %
          (args.variants, args.seed))
    print(header)
    total = collections.Counter()
    for kind, counts in table.items():
        if not counts:
            continue
        total.update(counts)
        print(kind.ljust(width) + "".join(str(counts[c]).rjust(16) for c in CLASSES))
    print("total".ljust(width) + "".join(str(total[c]).rjust(16) for c in CLASSES))
    for index, base, kind, tool, cls, err in failures:
        first = "; ".join(err.strip().splitlines()[:3])
        print("FAIL v%05d %s %s %s: %s: %s" % (index, base, kind, tool, cls, first[:400]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
