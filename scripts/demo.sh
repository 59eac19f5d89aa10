#!/usr/bin/env bash
# `make demo`: text in, text out. Generates an English-like corpus
# (test/e2e/make_corpus.py: sentences from a small grammar, no downloads),
# trains a byte-level BPE tokenizer on it in-process (Python's tokenizers,
# which `make deps` puts in .deps/python), makes shards with otc-data
# --tokenizer, compiles a GPT-2-shaped model (bench/make_gpt2_onnx.py: 2
# layers, 96 wide, context 64, GPT-2's initialization), trains it, printing
# the loss and the validation loss, plots the validation loss (here and as
# val_loss.svg), exports the trained weights with their logits (otc-export)
# and prints a paragraph sampled from them (otc-sample.py: temperature 0.8,
# the 20 likeliest tokens, seed 1). Uses the cuda target when a GPU answers,
# else the cpu target. Everything goes to BUILD/demo.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
out=$build/demo
py=/usr/bin/python3
export PYTHONPATH="$root/.deps/python${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c "import tokenizers" 2>/dev/null; then
  echo "otc demo: error: Python's tokenizers is missing (make deps installs it into .deps/python)" >&2
  exit 1
fi
target=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   [[ -f $build/lib/libotcrt_cuda.a ]]; then
  target=cuda
fi
rm -rf "$out" && mkdir -p "$out"
cd "$out"
echo "== otc demo (target $target): a corpus, a BPE tokenizer trained on it, a GPT trained on its tokens"
"$py" "$root/test/e2e/make_corpus.py" corpus.txt --sentences 20000
"$py" - <<'PY'
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train(["corpus.txt"], trainers.BpeTrainer(
    vocab_size=512, special_tokens=["<|endoftext|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
tok.save("tokenizer.json")
print("tokenizer.json: byte-level BPE, %d tokens" % tok.get_vocab_size())
PY
"$build/bin/otc-data" corpus.txt -o text --tokenizer tokenizer.json --python "$py" \
  --val-fraction 0.05
"$py" "$root/bench/make_gpt2_onnx.py" gpt.onnx --layers 2 --embd 96 --heads 4 --vocab 512 \
  --seq 64 > /dev/null
"$build/bin/otc-compile" gpt.onnx -o gpt --target=$target --micro-batch 8 --grad-accum 1
# GPT-2's initialization by parameter name, in place of the graph's zeros.
"$py" - "$root/bench" "$root/test/e2e" <<'PY'
import sys
sys.path[:0] = sys.argv[1:3]
import speed
import st_io
init = st_io.read("gpt/init.safetensors")
params = [{"name": k, "shape": list(v.shape)} for k, v in init.items()]
st_io.write("gpt/init.safetensors", speed.gpt2_init(params, 2, 1))
PY
echo "== training 400 AdamW steps of 8 x 64 tokens (warmup + cosine)"
gpt/train --data 'text_train_*.bin' --val-data 'text_val_*.bin' --steps 400 --lr 3e-3 \
  --warmup 20 --lr-schedule cosine --min-lr 3e-4 --grad-clip 1 --log-every 50 \
  --val-every 50 --val-batches 4 --save ckpt --log-jsonl train.jsonl
echo "== validation loss"
"$py" - <<'PY'
import json
points = [(r["step"], r["val_loss"]) for r in map(json.loads, open("train.jsonl"))
          if r.get("event") == "val"]
lo, hi = min(v for _, v in points), max(v for _, v in points)
for step, v in points:
    bar = int(round(50 * (v - lo) / (hi - lo))) if hi > lo else 0
    print("  step %4d  %.3f  %s" % (step, v, "#" * (bar + 1)))
# The same curve as a small SVG.
w, h, pad = 320, 160, 30
xs = [pad + (w - 2 * pad) * i / max(len(points) - 1, 1) for i in range(len(points))]
ys = [h - pad - (h - 2 * pad) * ((v - lo) / (hi - lo) if hi > lo else 0) for _, v in points]
path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", x, y)
                for i, (x, y) in enumerate(zip(xs, ys)))
with open("val_loss.svg", "w") as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">\n' % (w, h))
    f.write('<rect width="100%" height="100%" fill="white"/>\n')
    f.write('<path d="%s" fill="none" stroke="steelblue" stroke-width="2"/>\n' % path)
    f.write('<text x="%d" y="16" font-size="12">validation loss, %.2f to %.2f over %d steps</text>\n'
            % (pad, hi, lo, points[-1][0]))
    f.write("</svg>\n")
print("  (plot: val_loss.svg)")
PY
"$build/bin/otc-export" gpt.onnx --weights ckpt -o trained.onnx --expose-logits
echo "== a paragraph sampled from the trained model (otc-sample.py, prompt \"the compiler\")"
"$py" "$build/bin/otc-sample.py" trained.onnx --tokenizer tokenizer.json \
  --prompt "the compiler" --tokens 80 --temperature 0.8 --top-k 20 --seed 1 \
  --otc-run "$build/bin/otc-run" | fold -s -w 96
echo "== done: $out"
