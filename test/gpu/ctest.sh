#!/usr/bin/env bash
# ctest's `gpu` entries (label gpu; `make test-gpu` runs them, `make test`
# leaves them out):
#
#   ctest.sh build BIN OUTDIR   the build half (test/gpu/build.sh) into OUTDIR,
#                               with otc from BIN; needs no GPU
#   ctest.sh run OUTDIR         the run half (OUTDIR/run.sh) when nvidia-smi -L
#                               lists a GPU; else says so and exits 77, which
#                               ctest reports as skipped
#
# Without a GPU here, OUTDIR (a few tens of MB) can be copied to a GPU
# machine and run there as OUTDIR/run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
  build)
    rm -rf "${3:?usage: ctest.sh build BIN OUTDIR}"
    OTC_BIN=$2 "$here/build.sh" "$3"
    ;;
  run)
    out=${2:?usage: ctest.sh run OUTDIR}
    if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
      echo "gpu tests: skipped: no GPU here (nvidia-smi -L lists none);" \
           "copy $out to a GPU machine and run $out/run.sh there"
      exit 77
    fi
    "$out/run.sh"
    ;;
  *)
    echo "usage: ctest.sh build BIN OUTDIR | ctest.sh run OUTDIR" >&2
    exit 2
    ;;
esac
