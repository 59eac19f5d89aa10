"""Minimal safetensors reader/writer on numpy arrays, shared by the e2e
scripts (make_mlp_golden.py, compare_grads.py). Format: 8-byte little-endian
header length, a JSON header {name: {dtype, shape, data_offsets}} padded with
spaces to a multiple of 8 bytes, then the raw little-endian tensor bytes. It
deliberately does not use the `safetensors` package, so it is an independent
implementation from the C++ one in runtime/. A BF16 tensor is read widened
to float32 (exact)."""
import json
import struct

import numpy as np

_DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
    "U16": np.uint16, "F16": np.float16, "I32": np.int32, "U32": np.uint32,
    "F32": np.float32, "F64": np.float64, "I64": np.int64, "U64": np.uint64,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def write(path, tensors, metadata=None):
    """Writes dict name -> numpy array (in insertion order) to path."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, offset = [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = _NAMES[array.dtype]
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read(path):
    """Returns dict name -> numpy array; raises ValueError naming the file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated at offset 0 (no header length)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: truncated header at offset 8 ({n} bytes declared)")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if base + end > len(raw):
            raise ValueError(f"{path}: tensor {name!r} truncated at offset {len(raw)}")
        if info["dtype"] == "BF16":
            # bfloat16, the upper half of a float32: widened exactly.
            half = np.frombuffer(raw[base + begin:base + end], dtype="<u2")
            out[name] = (half.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
            continue
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(raw[base + begin:base + end], dtype=dtype).reshape(info["shape"])
    return out
