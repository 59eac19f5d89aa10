#!/usr/bin/env python3
"""Checks of the buffers in checkpoints (test/e2e/lora-checkpoint.test,
buffers.test), on the raw safetensors bytes with json, struct and zlib (no
code shared with the runtime; numpy only to round float32 to bfloat16):

  sizes STATE INIT             what the LoRA golden's state.safetensors holds,
                               against its parameter counts worked out by
                               hand
  crcs STATE INIT MODEL_CPP    every buffer's "buffer_crc32/<name>" against
                               zlib's CRC-32 of its initial values as the
                               arena holds them (BF16 slots rounded to
                               nearest even), the slots read from the
                               program's slot table
  old STATE INIT MODEL_CPP OUT STATE as a checkpoint saved before buffers
                               were left out: "buffer/<name>" tensors with
                               their "crc32/" metadata, no "buffers" or
                               "buffer_crc32/" keys
  losses JSONL_A JSONL_B FIRST LAST
                               the step records FIRST..LAST of two --log-jsonl
                               files: identical loss and gradient norm
"""
import json
import re
import struct
import sys
import zlib

import numpy as np

# test/e2e/hf-lora (make_lora_golden.py): a Llama of 2 layers, hidden 32,
# MLP 64, 4 heads of 8, 2 key/value heads (k and v project 32 -> 16),
# vocabulary 96, untied head; LoRA r 4 on q_proj (32 -> 32) and v_proj
# (32 -> 16). By hand:
#   trained, per layer: q A 4 x 32 + B 32 x 4 = 256, v A 4 x 32 + B 16 x 4
#   = 192: 448, two layers 896;
#   frozen, per layer: q 32 x 32 + k 16 x 32 + v 16 x 32 + o 32 x 32 = 3072,
#   gate, up, down 3 x 64 x 32 = 6144, two norms 64: 9280, two layers 18560,
#   + final norm 32 + embedding 96 x 32 + head 96 x 32 = 24736;
#   and the rotary inv_freq, [4] float32, a buffer too.
TRAINED = 2 * (4 * 32 + 32 * 4 + 4 * 32 + 16 * 4)
FROZEN = 2 * (32 * 32 + 16 * 32 + 16 * 32 + 32 * 32 + 3 * 64 * 32 + 2 * 32) \
    + 32 + 2 * 96 * 32
INV_FREQ = 4


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    return raw, n, header, meta, 8 + n


def numel(info):
    count = 1
    for d in info["shape"]:
        count *= d
    return count


def buffer_slots(model_cpp):
    """(name, dtype) of every BUFFER slot of the program's slot table."""
    text = open(model_cpp).read()
    return re.findall(r'\{"([^"]*)", OTC_SLOT_BUFFER, OTC_(BF16|F32),', text)


def arena_bytes(raw, base, info, dtype):
    """A buffer's bytes as the runtime uploads them: float32 as is, or
    rounded to bfloat16, nearest even (the upper halves)."""
    begin, end = info["data_offsets"]
    values = np.frombuffer(raw[base + begin:base + end], dtype="<u4")
    if dtype == "F32":
        return values.tobytes()
    rounded = (values + 0x7FFF + ((values >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def crc(data):
    return "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)


def sizes(state, init):
    raw, n, header, meta, _ = load(state)
    _, _, iheader, _, _ = load(init)
    trained = sum(numel(v) for k, v in iheader.items() if "lora_" in k)
    inv = sum(numel(v) for k, v in iheader.items() if k.endswith("inv_freq"))
    frozen = sum(numel(v) for k, v in iheader.items()) - trained - inv
    print("init: trained %d (by hand %d), frozen %d (by hand %d), inv_freq %d"
          % (trained, TRAINED, frozen, FROZEN, inv))
    kinds = {}
    for name in header:
        kinds[name.split("/")[0]] = kinds.get(name.split("/")[0], 0) + 1
    print("state tensors:", sorted(kinds.items()))
    data = sum(v["data_offsets"][1] - v["data_offsets"][0] for v in header.values())
    want = 3 * 4 * TRAINED  # masters and both moments, F32
    print("state: %d bytes = 8 + header %d + data %d; by hand 3 x 4 x %d = %d: %s"
          % (len(raw), n, data, TRAINED, want,
             "PASS" if data == want and len(raw) == 8 + n + data else "FAIL"))
    frozen_bytes = 2 * FROZEN + 4 * INV_FREQ
    print("buffers left out: %d bytes (BF16 %d x 2 + F32 %d x 4); the state "
          "is %s than half of them"
          % (frozen_bytes, FROZEN, INV_FREQ,
             "smaller" if 2 * len(raw) < frozen_bytes else "NOT smaller"))
    print("metadata buffers =", meta.get("buffers"))


def crcs(state, init, model_cpp):
    _, _, _, meta, _ = load(state)
    iraw, _, iheader, _, ibase = load(init)
    slots = buffer_slots(model_cpp)
    bad = [name for name, dtype in slots
           if meta.get("buffer_crc32/" + name) !=
           crc(arena_bytes(iraw, ibase, iheader[name], dtype))]
    extra = sorted(set(k[len("buffer_crc32/"):] for k in meta
                       if k.startswith("buffer_crc32/")) - set(n for n, _ in slots))
    counts = {d: sum(1 for _, t in slots if t == d) for d in ("BF16", "F32")}
    print("buffer crc32: %d slots (%d BF16, %d F32), %d differ from the initial "
          "values, %d not a slot" % (len(slots), counts["BF16"], counts["F32"],
                                     len(bad), len(extra)))
    for name in bad:
        print("differs:", name)


def old(state, init, model_cpp, out):
    raw, _, header, meta, base = load(state)
    iraw, _, iheader, _, ibase = load(init)
    tensors = []
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors.append((name, info["dtype"], info["shape"], raw[base + begin:base + end]))
    for name, dtype in buffer_slots(model_cpp):
        tensors.append(("buffer/" + name, dtype, iheader[name]["shape"],
                        arena_bytes(iraw, ibase, iheader[name], dtype)))
    meta = {k: v for k, v in meta.items()
            if k != "buffers" and not k.startswith("buffer_crc32/")}
    out_header, offset, blobs = {}, 0, []
    for name, dtype, shape, data in tensors:
        meta["crc32/" + name] = crc(data)
        out_header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    out_header = dict([("__metadata__", meta)] + list(out_header.items()))
    text = json.dumps(out_header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print("old format: %d tensors, %d of them buffer/"
          % (len(tensors), sum(1 for t in tensors if t[0].startswith("buffer/"))))


def losses(a, b, first, last):
    def steps(path):
        records = [json.loads(line) for line in open(path)]
        return {r["step"]: (r["loss"], r["grad_norm"]) for r in records
                if r.get("event") == "step" and first <= r["step"] <= last}
    sa, sb = steps(a), steps(b)
    same = len(sa) == last - first + 1 and sa == sb
    print("steps %d-%d: %s" % (first, last, "identical losses and norms" if same
                               else "DIFFERENT %s vs %s" % (sa, sb)))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "sizes":
        sizes(*args)
    elif cmd == "crcs":
        crcs(*args)
    elif cmd == "old":
        old(*args)
    elif cmd == "losses":
        losses(args[0], args[1], int(args[2]), int(args[3]))
    else:
        sys.exit("unknown command " + cmd)


main()
