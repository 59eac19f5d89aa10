#!/usr/bin/env python3
"""For deferred-init.test: converts an ONNX model to one that keeps every
initializer in an external data file (onnx.save_model), or checks that an
otc-compile build's init.safetensors holds the model's initializers:

    check_init_values.py external MODEL OUT.onnx
    check_init_values.py zeros MODEL OUT.onnx
    check_init_values.py compare MODEL INIT.safetensors
    check_init_values.py same MODEL OTHER.onnx
    check_init_values.py nan MODEL OUT.onnx NAME INDEX

`nan` writes the model as `external` does, with element INDEX (flat) of
initializer NAME set to NaN: a damaged weight.

`zeros` writes the model with every float initializer's values zero (what
a sparse external-data file made to size a plan holds).
`compare` reads every tensor of INIT.safetensors and the initializer of the
same name from MODEL (ONNX's own reader, numpy_helper), and prints one line:
how many are equal bit for bit, how many differ and how many have no
initializer of that name. Exits 1 when any differs or none was compared.
`same` prints whether two models (external data read) have the same
initializers, names and values bit for bit."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def main():
    mode, model, out = sys.argv[1:4]
    if mode == "external":
        m = onnx.load(model)
        onnx.save_model(m, out, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(out) + ".data",
                        size_threshold=0)
        print("external:", sum(1 for _ in m.graph.initializer), "initializers")
        return 0
    if mode == "nan":
        name, index = sys.argv[4], int(sys.argv[5])
        m = onnx.load(model)
        for i, init in enumerate(m.graph.initializer):
            if init.name == name:
                values = numpy_helper.to_array(init).copy()
                values.reshape(-1)[index] = np.nan
                m.graph.initializer[i].CopyFrom(numpy_helper.from_array(values, name))
        onnx.save_model(m, out, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(out) + ".data",
                        size_threshold=0)
        print("nan:", name, index)
        return 0
    if mode == "zeros":
        m = onnx.load(model)
        for init in m.graph.initializer:
            if init.data_type == onnx.TensorProto.FLOAT:
                n = int(np.prod(init.dims))
                del init.float_data[:]
                init.raw_data = bytes(4 * n)
        onnx.save(m, out)
        print("zeros:", out)
        return 0
    if mode == "same":
        a, b = ({i.name: numpy_helper.to_array(i) for i in onnx.load(p).graph.initializer}
                for p in (model, out))
        equal = sorted(a) == sorted(b) and all(
            a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and
            a[k].tobytes() == b[k].tobytes() for k in a)
        print(f"{len(a)} initializers, " + ("all equal" if equal else "they differ"))
        return 0 if equal else 1
    inits = {i.name: numpy_helper.to_array(i)
             for i in onnx.load(model).graph.initializer}
    equal = differ = unnamed = 0
    for name, values in st_io.read(out).items():
        if name not in inits:
            unnamed += 1
        elif (values.shape == inits[name].shape and
              np.array_equal(values.view(np.uint32),
                             inits[name].astype(np.float32).view(np.uint32))):
            equal += 1
        else:
            differ += 1
            print("differs:", name)
    print(f"{equal} equal, {differ} differ, {unnamed} without an initializer")
    return 0 if equal and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
