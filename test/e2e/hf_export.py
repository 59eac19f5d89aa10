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


def golden_grads(module, loss, inits=None):
    """{"loss", "grad/<name>"} after `loss.backward()` over `module`: every
    parameter with a gradient. With `inits` (the export's initializers by
    name, numpy), a parameter the exporter wrote under another name (a tied
    alias, or a transposed copy such as TorchScript's `onnx::MatMul_N`) is
    named by that initializer, its gradient transposed for a copy (found by
    comparing values)."""
    loss.backward()
    grads = {"loss": loss.detach()}
    for name, p in module.named_parameters():
        if p.grad is None:
            continue
        key, grad = name, p.grad.detach()
        if inits is not None and name not in inits:
            value = p.detach().float().numpy()
            for iname, init in inits.items():
                if init.shape == value.shape and (init == value).all():
                    key = iname
                    break
                if init.shape == value.T.shape and (init == value.T).all():
                    key, grad = iname, grad.T.contiguous()
                    break
        grads["grad/" + key] = grad
    return grads


def write_small_golden(model, make, x, targets, classes, out):
    """Exports `model` (input x -> logits) by README's recipe (dynamo,
    optimize=False, a dynamic batch) to out/model.onnx with its weights
    inline, and writes out/batch.safetensors (x, targets) and
    out/grads.safetensors: `loss` and grad/<parameter>, the mean
    cross-entropy's gradients computed in float64 by `make()`, a fresh model
    given `model`'s weights. Returns the loss."""
    import torch
    from safetensors.torch import save_file
    path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, (x,), path, dynamo=True, optimize=False,
                      input_names=["x"], output_names=["logits"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    save_inline(path)
    save_file({"x": x, "targets": targets},
              os.path.join(out, "batch.safetensors"))
    ref = make().double()
    ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    logits = ref(x.double())
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, classes),
                                             targets.reshape(-1))
    grads = golden_grads(ref, loss)
    save_file({k: v.contiguous() for k, v in grads.items()},
              os.path.join(out, "grads.safetensors"))
    return loss.item()
