"""Edits of safetensors files for the runtime tests, on the raw bytes (no
code shared with the runtime):

  st_edit.py set FILE OUT NAME INDEX VALUE   copy FILE to OUT with element
                                             INDEX (flat) of NAME set to VALUE
  st_edit.py crc FILE                        check every "crc32/<name>"
                                             metadata entry against zlib's
                                             CRC-32 of the tensor's bytes;
                                             prints "crc32 ok N"
  st_edit.py flip FILE NAME                  flips one bit of the middle byte
                                             of tensor NAME in place
  st_edit.py strip FILE                      removes the crc32/ metadata
  st_edit.py norm GRADS LOG                  compares the gradient norm of
                                             LOG's first step line with the L2
                                             norm of the grad/ tensors of
                                             GRADS (relative 1e-4)
"""
import json
import math
import struct
import sys
import zlib

import numpy as np


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw, json.loads(raw[8:8 + n].decode("utf-8")), 8 + n


def save(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def main():
    cmd = sys.argv[1]
    raw, header, base = load(sys.argv[2])
    data = bytearray(raw[base:])
    if cmd == "set":
        out, name, index, value = sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
        info = header[name]
        dtype = np.dtype(DTYPES[info["dtype"]])
        begin = info["data_offsets"][0] + index * dtype.itemsize
        data[begin:begin + dtype.itemsize] = np.array([float(value) if dtype.kind == "f"
                                                       else int(value)], dtype).tobytes()
        save(out, header, bytes(data))
    elif cmd == "crc":
        meta = header.get("__metadata__", {})
        count = 0
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            want = "%08x" % (zlib.crc32(bytes(data[begin:end])) & 0xFFFFFFFF)
            if meta.get("crc32/" + name) != want:
                print("crc32 mismatch", name, meta.get("crc32/" + name), want)
                sys.exit(1)
            count += 1
        print("crc32 ok", count)
    elif cmd == "flip":
        begin, end = header[sys.argv[3]]["data_offsets"]
        data[(begin + end) // 2] ^= 0x10
        save(sys.argv[2], header, bytes(data))
    elif cmd == "strip":
        meta = header.get("__metadata__", {})
        header["__metadata__"] = {k: v for k, v in meta.items() if not k.startswith("crc32/")}
        save(sys.argv[2], header, bytes(data))
    elif cmd == "norm":
        total = 0.0
        for name, info in header.items():
            if name.startswith("grad/"):
                begin, end = info["data_offsets"]
                g = np.frombuffer(bytes(data[begin:end]), DTYPES[info["dtype"]])
                total += float(np.sum(g.astype(np.float64) ** 2))
        want = math.sqrt(total)
        line = next(l for l in open(sys.argv[3]) if l.startswith("step "))
        got = float(line.split("| norm ")[1].split()[0])
        ok = abs(got - want) <= 1e-4 * want
        print("norm %s: %.6f vs %.6f" % ("ok" if ok else "differs", got, want))


main()
