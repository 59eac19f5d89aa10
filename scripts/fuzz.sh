#!/usr/bin/env bash
# The importer's fuzz target (fuzz/import-fuzzer.cpp): libFuzzer + AddressSanitizer,
# built with clang in its own build directory (the main build uses g++).
#
#   scripts/fuzz.sh build [DIR]   install clang and its fuzzer runtime if missing, configure
#                                 DIR (default build-fuzz) with -DOTC_FUZZ=ON, build the target
#   scripts/fuzz.sh smoke [DIR]   build, then fuzz for FUZZ_SECONDS (default 30) from the seeds,
#                                 or FUZZ_SMOKE_RUNS executions from seed FUZZ_SEED (repeatable)
#   scripts/fuzz.sh long [DIR]    build, then fuzz until FUZZ_RUNS executions (default
#                                 1000000), keeping the corpus in DIR/corpus across runs
#
# The seed corpus is every test model of at most 16 KB (test/frontend/Inputs, test/e2e),
# gathered into DIR/seeds. A crash, sanitizer report or timeout stops the run and leaves the
# input in DIR/artifacts (replay: DIR/bin/otc-import-fuzzer DIR/artifacts/crash-...).
set -euo pipefail
mode=${1:?usage: scripts/fuzz.sh build|smoke|long [DIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${2:-$here/build-fuzz}

pkgs=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "fuzz: installing missing packages: ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get -o DPkg::Lock::Timeout=600 -q update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 -q install -y \
    --no-install-recommends "${missing[@]}"
fi

if [[ ! -f $dir/build.ninja ]]; then
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOTC_FUZZ=ON \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir ${FUZZ_CMAKE_FLAGS:-}
fi
cmake --build "$dir" --target otc-import-fuzzer -j "${JOBS:-$(nproc)}"
[[ $mode == build ]] && exit 0

mkdir -p "$dir/seeds" "$dir/corpus" "$dir/artifacts"
for f in "$here"/test/frontend/Inputs/*.onnx "$here"/test/e2e/*/*.onnx; do
  [[ $(stat -c %s "$f") -le 16384 ]] || continue
  rel=${f#"$here"/test/}
  cp "$f" "$dir/seeds/${rel//\//_}"
done

# Leaks are not what this target looks for (MLIR keeps uniqued storage alive).
# User poisoning off: LLVM's allocators poison their slabs in code built with
# ASan and unpoison on allocation, and the importer (instrumented) shares those
# header functions with the uninstrumented MLIR libraries, so the linker may
# pair one side's poisoning with the other's allocation (a false use-after-poison
# at MLIRContext creation, seen with clang 14 and LLVM 19).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}
common=(-timeout=20 -rss_limit_mb=4096 -max_len=16384 -artifact_prefix="$dir/artifacts/"
        -print_final_stats=1)
case $mode in
  smoke)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # FUZZ_SMOKE_RUNS (with FUZZ_SEED) makes the run repeatable: that many
    # executions from that seed, instead of FUZZ_SECONDS of random ones.
    if [[ -n ${FUZZ_SMOKE_RUNS:-} ]]; then
      limit=(-runs="$FUZZ_SMOKE_RUNS" -seed="${FUZZ_SEED:-1}")
    else
      limit=(-max_total_time="${FUZZ_SECONDS:-30}")
    fi
    "$dir/bin/otc-import-fuzzer" "${common[@]}" "${limit[@]}" "$work" "$dir/seeds"
    ;;
  long)
    "$dir/bin/otc-import-fuzzer" "${common[@]}" -runs="${FUZZ_RUNS:-1000000}" \
      "$dir/corpus" "$dir/seeds"
    ;;
  *)
    echo "usage: scripts/fuzz.sh build|smoke|long [DIR]" >&2
    exit 2
    ;;
esac
