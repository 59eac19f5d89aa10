#!/usr/bin/env bash
# Installs, idempotently, the Debian packages otc needs to build and test. Packages already
# present are skipped, so a warm machine pays only a dpkg query. apt waits for its lock
# instead of failing when another apt is running. Then fetches the cudnn-frontend headers
# (scripts/fetch-cudnn-frontend.sh; optional: the build goes on without them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pkgs=(cmake ninja-build mold g++ llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
      libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler libabsl-dev
      libgtest-dev libgmock-dev libopenblas-dev libopenblas0-openmp python3-numpy python3-onnx python3-pip
      libopenmpi-dev openmpi-bin python3-sentencepiece)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "otc: installing missing packages: ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  apt_opts=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 -q)
  $sudo apt-get "${apt_opts[@]}" update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
fi
"$here/fetch-cudnn-frontend.sh"
# Python's tokenizers (Hugging Face), which `otc-data --tokenizer` runs on a
# tokenizer.json and the tests compare with: not in Debian, so from PyPI,
# pinned, into .deps/python (git-ignored), which the tests put on PYTHONPATH.
tok_version=0.23.3
deps_python="$here/../.deps/python"
if ! PYTHONPATH="$deps_python" /usr/bin/python3 -c \
     "import tokenizers, sys; sys.exit(tokenizers.__version__ != '$tok_version')" 2>/dev/null; then
  echo "otc: installing Python's tokenizers $tok_version into .deps/python"
  rm -rf "$deps_python"
  /usr/bin/python3 -m pip install -q --no-deps --disable-pip-version-check --root-user-action=ignore \
    --target "$deps_python" "tokenizers==$tok_version" ||
    echo "otc: warning: could not install tokenizers (offline?): the tokenizer tests will fail"
fi
