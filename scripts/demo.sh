#!/usr/bin/env bash
# `make demo`: trains the example GPT (test/e2e/gpt2-opset14/gpt2.onnx:
# GPT-2-style, 2 layers, vocab 64, context 16) on text this project ships (its
# own README, lower-cased and mapped to 64 symbols by otc-data), printing the
# loss as it falls and the validation loss, then exports the trained weights
# to ONNX (otc-export) and prints a short greedy sample generated from them,
# one token per otc-run call on the exported model's logits. Uses the cuda
# target when a GPU answers, else the cpu target.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/test/e2e/gpt2-opset14/gpt2.onnx
out=$build/demo
target=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   [[ -f $build/lib/libotcrt_cuda.a ]]; then
  target=cuda
fi
rm -rf "$out" && mkdir -p "$out"
echo "== otc demo: $model (target $target)"
"$build/bin/otc-data" "$root/README.md" -o "$out/text" --vocab=chars --max-vocab 64 \
  --lower --val-fraction 0.1
"$build/bin/otc-compile" "$model" -o "$out/gpt" --target=$target --micro-batch 8 --grad-accum 2
echo "== training 300 AdamW steps, 2 x 8 windows of 16 characters each (warmup + cosine)"
"$out/gpt/train" --data "$out/text_train_*.bin" --val-data "$out/text_val_*.bin" \
  --steps 300 --lr 1e-2 --warmup 20 --lr-schedule cosine --min-lr 1e-3 --grad-clip 1 \
  --log-every 25 --val-every 100 --val-batches 8 --save "$out/ckpt" \
  --log-jsonl "$out/train.jsonl"
"$build/bin/otc-export" "$model" --weights "$out/ckpt" -o "$out/trained.onnx" --expose-logits
echo "== greedy sample from the trained weights (otc-run on $out/trained.onnx)"
/usr/bin/python3 - "$build/bin/otc-run" "$out" "$root/test/e2e" <<'PY'
import subprocess, sys
otc_run, out, e2e = sys.argv[1:]
sys.path.insert(0, e2e)
import numpy as np
import st_io
vocab = open(f"{out}/text_vocab.bin", "rb").read().decode("latin-1")
prompt, T, n_new = "the train program ", 16, 80
ids = [vocab.index(c) for c in prompt if c in vocab]
for _ in range(n_new):
    ctx = ids[-T:]
    idx = np.zeros((1, T), np.int64)
    idx[0, :len(ctx)] = ctx
    st_io.write(f"{out}/gen_in.safetensors", {"idx": idx, "targets": idx})
    subprocess.run([otc_run, f"{out}/trained.onnx", "--inputs", f"{out}/gen_in.safetensors",
                    "--outputs", f"{out}/gen_out.safetensors", "--dim", "batch=1"], check=True)
    logits = st_io.read(f"{out}/gen_out.safetensors")["logits"].reshape(T, -1)
    ids.append(int(np.argmax(logits[len(ctx) - 1])))
print(repr("".join(vocab[i] for i in ids)))
PY
