#!/usr/bin/env python3
"""Text from a trained language model: the prompt encoded with the model's
tokenizer, new ids drawn (temperature, top-k, top-p, seed), the result
decoded with the same tokenizer.

    otc-sample.py (--program DIR [--weights CKPT] | MODEL.onnx)
                  (--tokenizer PATH | --vocab-file PREFIX_vocab.bin)
                  --prompt TEXT [--tokens N] [--temperature T] [--top-k K]
                  [--top-p P] [--seed S] [--doc-token TOKEN] [--otc-run PATH]

--program DIR is a program compiled with otc-compile --generate (the one
that trains the model, or one compiled for sampling): its `train --generate`
draws the ids one position at a time with the keys and values cached, from
the parameters of --weights (a checkpoint directory or its
model.safetensors; default the program's initial parameters). MODEL.onnx is
an exported model whose logits are an output (otc-export --weights CKPT
--expose-logits), whose ids `otc-run --generate` draws with the reference
interpreter: the whole forward again for every id, far slower. --tokenizer takes what otc-data --tokenizer
took (a tokenizer.json or a SentencePiece .model), and the prompt starts, as
every document of the shards did, with the same separator token (--doc-token
or the tokenizer's BOS / end-of-text); --vocab-file takes the character
table of otc-data --vocab=chars. Prints the prompt and its continuation.
Errors are one line `otc-sample: error: ...` and exit status 1.
"""
import argparse
import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    sys.stderr.write("otc-sample: error: %s\n" % message)
    sys.exit(1)


def tokenize_module():
    """otc-tokenize.py, next to this script: the same tokenizers and
    separator rule as otc-data's."""
    path = os.path.join(HERE, "otc-tokenize.py")
    if not os.path.exists(path):
        fail("%s is missing" % path)
    spec = importlib.util.spec_from_file_location("otc_tokenize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--program")
    ap.add_argument("--weights")
    ap.add_argument("--tokenizer")
    ap.add_argument("--vocab-file")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--doc-token", default="")
    ap.add_argument("--otc-run", default=os.path.join(HERE, "otc-run"))
    a = ap.parse_args()
    if bool(a.tokenizer) == bool(a.vocab_file):
        fail("give one of --tokenizer PATH and --vocab-file PREFIX_vocab.bin")
    if bool(a.model) == bool(a.program):
        fail("give one of --program DIR (compiled with --generate) and MODEL.onnx")
    if a.weights and not a.program:
        fail("--weights goes with --program (MODEL.onnx holds its weights)")
    if a.model and not os.path.exists(a.model):
        fail("cannot read %s: no such file" % a.model)
    train = os.path.join(a.program, "train") if a.program else None
    if train and not os.access(train, os.X_OK):
        fail("%s is not a compiled program (no train)" % a.program)
    weights = a.weights
    if weights and os.path.isdir(weights):
        weights = os.path.join(weights, "model.safetensors")
    if weights and not os.path.exists(weights):
        fail("cannot read %s: no such file" % weights)

    if a.tokenizer:
        tz = tokenize_module()
        tz.fail = lambda message: fail(message)
        tok = tz.load(a.tokenizer)
        sep = tz.separator(tok, a.doc_token)
        ids = ([sep] if sep is not None else []) + list(tok.encode(a.prompt))
        decode = tok.decode
    else:
        table = open(a.vocab_file, "rb").read().decode("latin-1")
        unknown = table.index("?") if "?" in table else None
        ids = []
        for c in a.prompt:
            if c in table:
                ids.append(table.index(c))
            elif unknown is not None:
                ids.append(unknown)
            else:
                fail("the prompt's %r is not in %s" % (c, a.vocab_file))
        sep = None
        decode = lambda xs: "".join(table[i] for i in xs)
    if not ids:
        fail("the prompt gives no token ids")

    draw = ["--generate", str(a.tokens),
            "--prompt-ids", ",".join(str(i) for i in ids),
            "--temperature", repr(a.temperature), "--top-k", str(a.top_k),
            "--top-p", repr(a.top_p), "--seed", str(a.seed)]
    if train:
        cmd = [train] + draw + ["--quiet"] + (["--init", weights] if weights else [])
    else:
        cmd = [a.otc_run, a.model] + draw
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        err = run.stderr.strip().splitlines()
        fail(err[-1].split("error: ", 1)[-1] if err else "%s failed" % cmd[0])
    out = [int(x) for x in run.stdout.split()]
    start = 1 if sep is not None else 0
    sys.stdout.write(decode(out[start:]) + "\n")


if __name__ == "__main__":
    main()
