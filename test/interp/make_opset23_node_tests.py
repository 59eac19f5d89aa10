#!/usr/bin/env python3
"""Generates test/interp/opset23/: ONNX node tests for three ops that are new
in opset 23, Attention, RMSNormalization and RotaryEmbedding, and for
Softplus (whose own node tests are at opset 1), in the layout of
ONNX's own backend node tests (what run_onnx_node_tests.py --data reads):

    opset23/<test name>/model.onnx
    opset23/<test name>/test_data_set_0/input_<i>.pb, output_<i>.pb

Each model.onnx holds one node, graph inputs and outputs typed with their full
static shapes, opset_import ai.onnx 23, ir_version 10, producer_name
"make_opset23_node_tests". Each .pb file is a serialized TensorProto named
after its graph input or output, numbered in graph order. Tensors are float32,
except RotaryEmbedding's position_ids (int64) and boolean attention masks
(bool), and tiny (batch 2, 2 to 4 heads, sequences of 3 to 5, head size 4 to
8), so the whole directory stays small.

The expected outputs are computed by onnx.reference.ReferenceEvaluator, ONNX's
reference implementation of the operators' specification. It shares no code
with otc, so it is an independent oracle for otc's importer and interpreter.
The inputs are drawn from numpy generators seeded by each test's name; the
RotaryEmbedding cos/sin caches are the cosines and sines of real rotary angles
(position * inverse frequency, base 100 so that every frequency turns
visibly over a few positions), not random numbers.

After writing a test the script loads it back, checks the model with
onnx.checker.check_model(full_check=True) (which also runs strict shape
inference against the declared shapes), runs the reference evaluator again on
the saved inputs and compares the result with the saved outputs, bit for bit.
It prints one line per test and the total size.

The results depend on the reference implementation, so onnx is pinned; the
script refuses another version unless --any-version is given:

    python3.11 -m venv /work/venv-hf
    /work/venv-hf/bin/pip install onnx==1.23.2 numpy==2.4.6
    /work/venv-hf/bin/python test/interp/make_opset23_node_tests.py

The output is deterministic: running the script twice writes byte-identical
files. Each test directory is replaced as a whole; test_* directories under
the output directory that this script does not make are reported, not removed.
"""

import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ONNX_PIN = "1.23.2"
OPSET = 23
IR_VERSION = 10
PRODUCER = "make_opset23_node_tests"

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "opset23")

# RotaryEmbedding's frequency base: inverse frequency i is BASE^(-2i/dim).
ROPE_BASE = 100.0


class Case:
    """One node test: a single `op_type` node over the named `inputs`
    ([(name, array)], in node and graph order) with `attributes`, producing
    the graph outputs `outputs` (names)."""

    def __init__(self, name, description, op_type, inputs, attributes=None,
                 outputs=("Y",)):
        self.name = name
        self.description = description
        self.op_type = op_type
        self.inputs = inputs
        self.attributes = attributes or {}
        self.outputs = list(outputs)


def rng_for(name):
    """A numpy generator seeded by the test's name, so that each test's data
    does not depend on which other tests exist or their order."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


# RMSNormalization

def rms_norm_cases():
    cases = []

    def add(name, description, x_shape, scale_shape, x_scale=1.0, **attrs):
        rng = rng_for(name)
        x = normal(rng, x_shape, x_scale)
        scale = (1.0 + normal(rng, scale_shape, 0.5)).astype(np.float32)
        cases.append(Case(name, description, "RMSNormalization",
                          [("X", x), ("scale", scale)], attrs))

    add("test_rms_normalization_3d_axis_neg1",
        "X [2,3,8], axis -1, scale [8]", [2, 3, 8], [8], axis=-1)
    add("test_rms_normalization_3d_axis_neg2",
        "X [2,3,4], axis -2 (RMS over the last two axes), scale [3,4]",
        [2, 3, 4], [3, 4], axis=-2)
    # Inputs of magnitude ~0.05, so that the mean square (~2.5e-3) and
    # epsilon 1e-3 are of the same order and a wrong epsilon shows.
    add("test_rms_normalization_epsilon",
        "X [2,3,8] of magnitude ~0.05, epsilon 1e-3 (default axis -1)",
        [2, 3, 8], [8], x_scale=0.05, epsilon=1e-3)
    add("test_rms_normalization_4d_axis_neg1",
        "X [2,2,3,4], axis -1, scale [4]", [2, 2, 3, 4], [4], axis=-1)
    return cases


# Attention

def float_mask(rng, t, s):
    """An additive [t, s] mask: small random values with some -inf entries,
    never a whole row of them."""
    mask = normal(rng, [t, s], 0.5)
    for i in range(t):
        mask[i, (2 * i + 1) % s] = -np.inf
    mask[t - 1, 0] = -np.inf
    assert np.isfinite(mask).any(axis=-1).all()
    return mask


def bool_mask(rng, shape):
    """A random boolean mask (True = attend, about 60% True) with at least
    one True in every row, so that no query row is fully masked."""
    mask = rng.random(shape) < 0.6
    t, s = shape[-2], shape[-1]
    for i in range(t):
        mask[..., i, i % s] = True
    assert mask.any(axis=-1).all() and not mask.all()
    return mask


def attention_cases():
    cases = []

    def add(name, description, b, h, hk, t, s, d, layout="4d",
            q_scale=1.0, mask=None, **attrs):
        rng = rng_for(name)
        if layout == "4d":
            q = normal(rng, [b, h, t, d], q_scale)
            k = normal(rng, [b, hk, s, d])
            v = normal(rng, [b, hk, s, d])
        else:
            q = normal(rng, [b, t, h * d], q_scale)
            k = normal(rng, [b, s, hk * d])
            v = normal(rng, [b, s, hk * d])
            attrs = dict(attrs, q_num_heads=h, kv_num_heads=hk)
        inputs = [("Q", q), ("K", k), ("V", v)]
        if mask == "float":
            inputs.append(("attn_mask", float_mask(rng, t, s)))
        elif mask == "bool":
            inputs.append(("attn_mask", bool_mask(rng, [b, 1, t, s])))
        cases.append(Case(name, description, "Attention", inputs, attrs))

    add("test_attention_4d",
        "Q/K/V [2,2,4,8], no mask, default scale 1/sqrt(8)",
        b=2, h=2, hk=2, t=4, s=4, d=8)
    add("test_attention_4d_causal",
        "Q/K/V [2,2,5,4], is_causal=1",
        b=2, h=2, hk=2, t=5, s=5, d=4, is_causal=1)
    add("test_attention_4d_gqa_causal",
        "Q [2,4,4,4], K/V [2,2,4,4] (grouped query, 2 query heads per KV "
        "head), is_causal=1",
        b=2, h=4, hk=2, t=4, s=4, d=4, is_causal=1)
    add("test_attention_4d_float_mask",
        "Q/K/V [2,2,4,4], additive float attn_mask [4,4] with -inf entries",
        b=2, h=2, hk=2, t=4, s=4, d=4, mask="float")
    add("test_attention_4d_bool_mask",
        "Q/K/V [2,2,4,4], bool attn_mask [2,1,4,4] (True = attend)",
        b=2, h=2, hk=2, t=4, s=4, d=4, mask="bool")
    add("test_attention_4d_scale",
        "Q/K/V [2,2,4,4], scale=0.3",
        b=2, h=2, hk=2, t=4, s=4, d=4, scale=0.3)
    # Q doubled so that the scaled scores reach the softcap's nonlinear range.
    add("test_attention_4d_softcap_causal",
        "Q/K/V [2,2,4,4] (Q of magnitude ~2), softcap=2.0, is_causal=1",
        b=2, h=2, hk=2, t=4, s=4, d=4, q_scale=2.0, softcap=2.0, is_causal=1)
    add("test_attention_4d_cross",
        "Q [2,2,3,4], K/V [2,2,5,4] (3 queries, 5 keys), no mask",
        b=2, h=2, hk=2, t=3, s=5, d=4)
    add("test_attention_4d_cross_causal",
        "Q [2,2,3,4], K/V [2,2,5,4], is_causal=1 (query i attends keys "
        "j <= i: top-left aligned without past_key)",
        b=2, h=2, hk=2, t=3, s=5, d=4, is_causal=1)
    add("test_attention_3d",
        "Q/K/V [2,4,8] with q_num_heads=2, kv_num_heads=2 (head size 4)",
        b=2, h=2, hk=2, t=4, s=4, d=4, layout="3d")
    add("test_attention_3d_gqa_causal",
        "Q [2,4,16], K/V [2,4,8] with q_num_heads=4, kv_num_heads=2 (head "
        "size 4), is_causal=1",
        b=2, h=4, hk=2, t=4, s=4, d=4, layout="3d", is_causal=1)
    return cases


# RotaryEmbedding

def rope_angles(positions, rotary_dim):
    """The rotary angles position * inverse frequency, [..., rotary_dim/2],
    in float64."""
    inv_freq = ROPE_BASE ** (-np.arange(0, rotary_dim, 2) / rotary_dim)
    return np.asarray(positions, dtype=np.float64)[..., None] * inv_freq


def rope_caches(positions, rotary_dim):
    """(cos_cache, sin_cache) of the angles at `positions`, float32."""
    angles = rope_angles(positions, rotary_dim)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


# Batch 0 starts at position 0, batch 1 at 4: every row of an 8-row cache is
# read, and the batches read different rows.
POSITION_IDS = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], dtype=np.int64)
MAX_POSITIONS = 8


def rotary_cases():
    cases = []

    def add(name, description, x_shape, head_size, rotary_dim=None,
            position_ids=True, **attrs):
        rng = rng_for(name)
        x = normal(rng, x_shape)
        dim = rotary_dim or head_size
        if rotary_dim is not None:
            attrs["rotary_embedding_dim"] = rotary_dim
        if position_ids:
            cos, sin = rope_caches(np.arange(MAX_POSITIONS), dim)
            inputs = [("X", x), ("cos_cache", cos), ("sin_cache", sin),
                      ("position_ids", POSITION_IDS)]
        else:
            cos, sin = rope_caches(POSITION_IDS, dim)
            inputs = [("X", x), ("cos_cache", cos), ("sin_cache", sin)]
        cases.append(Case(name, description, "RotaryEmbedding", inputs, attrs))

    add("test_rotary_embedding_4d",
        "X [2,2,4,8] as [batch, heads, seq, head], caches [8,4], "
        "position_ids [2,4]",
        [2, 2, 4, 8], head_size=8)
    add("test_rotary_embedding_3d_num_heads",
        "X [2,4,16] as [batch, seq, heads*head] with num_heads=2, caches "
        "[8,4], position_ids [2,4]",
        [2, 4, 16], head_size=8, num_heads=2)
    add("test_rotary_embedding_interleaved",
        "X [2,2,4,8], interleaved=1 (rotates pairs 2i, 2i+1), caches [8,4], "
        "position_ids [2,4]",
        [2, 2, 4, 8], head_size=8, interleaved=1)
    add("test_rotary_embedding_partial",
        "X [2,2,4,8], rotary_embedding_dim=4 (last 4 of 8 pass through), "
        "caches [8,2], position_ids [2,4]",
        [2, 2, 4, 8], head_size=8, rotary_dim=4)
    add("test_rotary_embedding_3d_caches",
        "X [2,2,4,8], caches [2,4,4] per batch and position, no position_ids",
        [2, 2, 4, 8], head_size=8, position_ids=False)
    return cases


# Softplus (whose node tests in libonnx-testdata are at opset 1, older
# than the importer reads): wide values, where the naive log(exp(x) + 1)
# overflows past 88 (the reference's own form: kept within +-30 here), and
# very negative ones, where softplus(x) is about exp(x).

def softplus_cases():
    cases = []
    rng = rng_for("test_softplus_opset23_wide")
    x = np.clip(normal(rng, [4, 8], 12.0), -30, 30).astype(np.float32)
    cases.append(Case("test_softplus_opset23_wide",
                      "X [4,8] of magnitude ~12, within +-30",
                      "Softplus", [("X", x)], {}))
    rng = rng_for("test_softplus_opset23_negative")
    x = (-20.0 + 15.0 * rng.random([3, 5])).astype(np.float32)
    cases.append(Case("test_softplus_opset23_negative",
                      "X [3,5] in [-20, -5): softplus(x) about exp(x)",
                      "Softplus", [("X", x)], {}))
    return cases


def all_cases():
    return (rms_norm_cases() + attention_cases() + rotary_cases() +
            softplus_cases())


# Models and test data

def value_info(name, array):
    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))


def make_model(case, outputs):
    """The one-node model of `case`, its graph outputs typed and shaped like
    the arrays `outputs` (None: float, shape unknown, to evaluate it)."""
    node = helper.make_node(case.op_type, [n for n, _ in case.inputs],
                            case.outputs, **case.attributes)
    if outputs is None:
        graph_outputs = [helper.make_tensor_value_info(
            n, onnx.TensorProto.FLOAT, None) for n in case.outputs]
    else:
        graph_outputs = [value_info(n, a) for n, a in zip(case.outputs, outputs)]
    graph = helper.make_graph(
        [node], case.name, [value_info(n, a) for n, a in case.inputs],
        graph_outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION, producer_name=PRODUCER)


def evaluate(model, feeds):
    """The reference implementation's outputs of `model` on `feeds`."""
    return ReferenceEvaluator(model).run(None, feeds)


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def read_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor.name, numpy_helper.to_array(tensor)


def write_case(case, out_dir):
    """Writes the test's directory; returns its path."""
    feeds = {n: a for n, a in case.inputs}
    outputs = evaluate(make_model(case, None), feeds)
    for name, array in zip(case.outputs, outputs):
        if not np.isfinite(array).all():
            raise RuntimeError(f"{case.name}: output '{name}' is not finite")
    model = make_model(case, outputs)
    test_dir = os.path.join(out_dir, case.name)
    if os.path.isdir(test_dir):
        shutil.rmtree(test_dir)
    data_dir = os.path.join(test_dir, "test_data_set_0")
    os.makedirs(data_dir)
    onnx.save(model, os.path.join(test_dir, "model.onnx"))
    for i, (name, array) in enumerate(case.inputs):
        write_tensor(os.path.join(data_dir, f"input_{i}.pb"), array, name)
    for i, (name, array) in enumerate(zip(case.outputs, outputs)):
        write_tensor(os.path.join(data_dir, f"output_{i}.pb"), array, name)
    return test_dir


def declared(value):
    """(numpy dtype, shape) of a graph input or output."""
    tensor_type = value.type.tensor_type
    shape = tuple(d.dim_value for d in tensor_type.shape.dim)
    return helper.tensor_dtype_to_np_dtype(tensor_type.elem_type), shape


def verify(test_dir):
    """Loads a test back, checks its model, and checks that the reference
    evaluator reproduces its saved outputs from its saved inputs, exactly.
    Raises on any mismatch; returns the model."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    graph = model.graph
    if (model.ir_version != IR_VERSION or model.producer_name != PRODUCER
            or [(o.domain, o.version) for o in model.opset_import]
            != [("", OPSET)] or len(graph.node) != 1 or graph.initializer):
        raise RuntimeError(f"{test_dir}: unexpected model header or graph")
    data_dir = os.path.join(test_dir, "test_data_set_0")

    def load(kind, values):
        arrays = {}
        for i, value in enumerate(values):
            name, array = read_tensor(os.path.join(data_dir, f"{kind}_{i}.pb"))
            if name != value.name or (array.dtype, array.shape) != declared(value):
                raise RuntimeError(
                    f"{test_dir}: {kind}_{i}.pb is '{name}' {array.dtype} "
                    f"{list(array.shape)}, the graph says '{value.name}' "
                    f"{declared(value)}")
            arrays[name] = array
        return arrays

    feeds = load("input", graph.input)
    expected = load("output", graph.output)
    extra = sorted(set(os.listdir(data_dir)) - {
        f"input_{i}.pb" for i in range(len(graph.input))} - {
        f"output_{i}.pb" for i in range(len(graph.output))})
    if extra:
        raise RuntimeError(f"{test_dir}: unexpected files {extra}")
    for value, got in zip(graph.output, evaluate(model, feeds)):
        want = expected[value.name]
        if got.dtype != want.dtype or got.tobytes() != want.tobytes():
            raise RuntimeError(
                f"{test_dir}: output '{value.name}' differs from the "
                "reference evaluator's")
    return model


def directory_size(path):
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(path) for f in files)


def describe_attributes(node):
    def text(value):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return ", ".join(f"{a.name}={text(helper.get_attribute_value(a))}"
                     for a in node.attribute)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--any-version", action="store_true",
                    help=f"run even if onnx is not {ONNX_PIN}")
    ap.add_argument("--out", default=OUT,
                    help="output directory (default: opset23/ beside this "
                         "script)")
    args = ap.parse_args()
    if onnx.__version__ != ONNX_PIN and not args.any_version:
        sys.exit(f"make_opset23_node_tests: onnx {onnx.__version__} is "
                 f"installed, pinned {ONNX_PIN} (the expected outputs come "
                 "from its reference implementation); see the docstring for "
                 "the venv, or pass --any-version")

    cases = all_cases()
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate test names"
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        test_dir = write_case(case, args.out)
        model = verify(test_dir)
        node = model.graph.node[0]
        print(f"{case.name} ok ({directory_size(test_dir)} bytes): "
              f"{node.op_type}"
              f"{' ' + describe_attributes(node) if node.attribute else ''}"
              f" -- {case.description}")
    stale = sorted(d for d in os.listdir(args.out)
                   if d.startswith("test_") and d not in names)
    for name in stale:
        print(f"note: {os.path.join(args.out, name)} is not made by this "
              "script (left in place)")
    print(f"{len(cases)} tests written and verified under {args.out}, "
          f"{directory_size(args.out)} bytes in all (onnx {onnx.__version__}, "
          f"numpy {np.__version__})")


if __name__ == "__main__":
    main()
