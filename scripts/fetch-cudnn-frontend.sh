#!/usr/bin/env bash
# Fetches, idempotently, the header-only cudnn-frontend C++ API (the `include/` folder of
# PyPI's nvidia-cudnn-frontend wheel) into .deps/cudnn-frontend/include, where
# runtime/CMakeLists.txt looks for it to build cuDNN's fused attention into libotcrt_cuda.
# Optional: when the download fails (offline, no pip) it says so and exits 0, and the
# runtime builds with its own attention kernels only. A present copy of the pinned version
# is kept as is. OTC_CUDNN_FRONTEND_VERSION overrides the pin.
set -uo pipefail
version=${OTC_CUDNN_FRONTEND_VERSION:-1.32.0}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.deps/cudnn-frontend

if [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$version" &&
      -f $dest/include/cudnn_frontend.h ]]; then
  exit 0
fi

skip() {
  echo "otc: cudnn-frontend $version not fetched ($1); the cuda runtime builds without cuDNN attention"
  exit 0
}

py=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -m pip --version >/dev/null 2>&1; then
    py=$candidate
    break
  fi
done
[[ -n $py ]] || skip "no python3 with pip"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "otc: fetching cudnn-frontend $version headers"
# The headers are the same in every wheel of a version: ask for one fixed wheel so that the
# result does not depend on the local interpreter.
"$py" -m pip download --quiet --no-deps --only-binary=:all: --timeout 30 --retries 1 \
  --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp \
  --dest "$tmp" "nvidia-cudnn-frontend==$version" >"$tmp/pip.log" 2>&1 ||
  skip "pip download failed: $(tail -n 1 "$tmp/pip.log")"
wheel=$(ls "$tmp"/nvidia_cudnn_frontend-*.whl 2>/dev/null | head -n 1)
[[ -n $wheel ]] || skip "no wheel downloaded"

"$py" - "$wheel" "$tmp/unpacked" <<'PY' || skip "cannot unpack $wheel"
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("include/")]
    if not any(n == "include/cudnn_frontend.h" for n in names):
        sys.exit("no include/cudnn_frontend.h in the wheel")
    for n in names:
        z.extract(n, out)
PY

mkdir -p "$root/.deps"
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/unpacked/include" "$dest/include"
echo "$version" >"$dest/VERSION"
echo "otc: cudnn-frontend $version headers in ${dest#"$root"/}/include"
