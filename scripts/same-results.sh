#!/usr/bin/env bash
# Checks that two builds of otc compile the golden models into programs that
# compute the same bits: for every model below, both otc-compile binaries
# build it for the cpu target (FP32 and BF16), the programs train two steps
# on the model's batch and dump loss and gradients, and the dumps, saved
# parameters and optimizer states (less the frozen buffers, see same_state)
# must be byte-identical; the cuda target's emitted source is
# compared as text (identical, or the lines that differ are shown). For
# refactors that must not change behaviour (issue 22's proof).
#
#   scripts/same-results.sh OLD_BIN_DIR NEW_BIN_DIR [WORK_DIR]
#
# Exits 1 when any program differs.
set -uo pipefail
old=${1:?usage: same-results.sh OLD_BIN_DIR NEW_BIN_DIR [WORK_DIR]}
new=${2:?usage: same-results.sh OLD_BIN_DIR NEW_BIN_DIR [WORK_DIR]}
src=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
freeze='--freeze=^rope_(cos|sin)$'
# MODEL MICRO-BATCH [otc-compile options]: the batch file holds micro-batch x 2.
models=("gpt2-opset17/gpt2 2" "llama-opset17/llama 2"
        "hf-gpt2/gpt2 2 --loss=cross_entropy:logits:targets" "mlp/mlp 4")
differ=0
# same_state OLD NEW: the optimizer states hold the same bytes. Byte-identical
# files are; so are two files whose tensors are the same but for the frozen
# buffers, which a checkpoint stores whole (before they left the state) or as
# CRC-32s of the initial values (after): model.safetensors holds those values
# either way, and it is compared byte for byte.
same_state() {
  cmp -s "$1" "$2" && return 0
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    head.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in head.items() if not k.startswith(("buffer/", "buffer_crc32/"))}
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY
}
for entry in "${models[@]}"; do
  read -r m mb extra <<< "$entry"
  d=$(dirname "$m")
  onnx=$src/test/e2e/$m.onnx
  batch=$src/test/e2e/$d/batch.safetensors
  [[ -f $onnx && -f $batch ]] || { echo "skip $d: no model or batch"; continue; }
  for p in fp32 bf16; do
    args=(--micro-batch "$mb" --grad-accum 2 "$freeze" $extra)
    [[ $p == bf16 ]] && args+=(--precision=bf16)
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      out=$work/$d-$p-$side
      rm -rf "$out"
      if ! "$bin/otc-compile" "$onnx" -o "$out" "${args[@]}" > "$out.log" 2>&1; then
        echo "FAIL $d $p: $side otc-compile failed (see $out.log)"
        differ=1
        continue 2
      fi
      { "$out/train" --batch "$batch" --dump-grads "$out.st" --quiet &&
        "$out/train" --batch "$batch" --steps 2 --lr 0.01 --grad-clip 1 \
          --save "$out.ck" --quiet; } > "$out.run.log" 2>&1 ||
        { echo "FAIL $d $p: $side program failed (see $out.run.log)"; differ=1; continue 2; }
    done
    if cmp -s "$work/$d-$p-old.st" "$work/$d-$p-new.st" &&
       cmp -s "$work/$d-$p-old.ck/model.safetensors" "$work/$d-$p-new.ck/model.safetensors" &&
       same_state "$work/$d-$p-old.ck/state.safetensors" "$work/$d-$p-new.ck/state.safetensors"; then
      echo "same $d $p: gradients and parameters after 2 steps, bit for bit"
    else
      echo "DIFFERENT $d $p"
      differ=1
    fi
    # The cuda target's source, as text.
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      "$bin/otc-compile" "$onnx" --target=cuda "${args[@]}" --compile-to=emit \
        > "$work/$d-$p-$side.cu" 2>/dev/null
    done
    if cmp -s "$work/$d-$p-old.cu" "$work/$d-$p-new.cu"; then
      echo "same $d $p: cuda source identical"
    else
      echo "text $d $p: cuda source differs in $(diff "$work/$d-$p-old.cu" "$work/$d-$p-new.cu" | grep -c '^[<>]') lines"
    fi
  done
done
exit $differ
