#!/usr/bin/env bash
# Makes a stand-in GPU test bundle in DIR for test/gpu/tally.test, to run
# run.sh's counting without a GPU: run.sh, tally.sh and the comparison
# scripts, and a manifest of three programs:
#   alpha 1e-4 golden     its cuda/train a stand-in whose --dump-grads copies
#                         the cpu dump: alpha-vs-cpu and alpha-vs-pytorch pass
#   beta-bf16 2e-2 -      no program: alpha-vs-cpu and the fallback attention
#                         fail
#   hf-gpt2 1e-4 golden   a program that fails: hf-gpt2-vs-cpu and its GEMM
#                         fallback fail, hf-gpt2-vs-pytorch is skipped
# Every other part of a bundle is missing.
#
#   fake_bundle.sh SRC DIR PYTHON     (SRC: the repository)
set -euo pipefail
src=$1 out=$2 py=$3
mkdir -p "$out"
cp "$src/test/gpu/run.sh" "$src/test/gpu/tally.sh" "$src/test/e2e/compare_grads.py" \
   "$src/test/e2e/st_io.py" "$out/"
printf '%s\n' "alpha 1e-4 golden" "beta-bf16 2e-2 -" "hf-gpt2 1e-4 golden" > "$out/manifest.txt"
mkdir -p "$out/alpha/cuda" "$out/hf-gpt2/cuda"
"$py" - "$out" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import st_io
dump = {"loss": np.array(2.5, dtype=np.float32), "grad/w": np.arange(6, dtype=np.float32)}
for name in ("alpha", "hf-gpt2"):
    st_io.write(f"{sys.argv[1]}/{name}/cpu.st", dump)
    st_io.write(f"{sys.argv[1]}/{name}/golden.safetensors", dump)
    st_io.write(f"{sys.argv[1]}/{name}/batch.safetensors", {"x": np.zeros(2, dtype=np.float32)})
PY
cat > "$out/alpha/cuda/train" <<'SH'
#!/usr/bin/env bash
# A stand-in cuda program: --dump-grads OUT writes the cpu program's dump.
while [[ $# -gt 0 ]]; do
  [[ $1 == --dump-grads ]] && { cp "$(dirname "$0")/../cpu.st" "$2"; exit 0; }
  shift
done
echo "stand-in: only --dump-grads" >&2
exit 1
SH
printf '#!/usr/bin/env bash\necho "stand-in: no device" >&2\nexit 1\n' > "$out/hf-gpt2/cuda/train"
chmod +x "$out/run.sh" "$out/alpha/cuda/train" "$out/hf-gpt2/cuda/train"
