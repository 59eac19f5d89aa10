#!/usr/bin/env bash
# The speed benchmark in one command: the build half (bench/speed-build.sh),
# then, when nvidia-smi finds a GPU here, the run half (bench/speed-run.sh);
# without a GPU it stops after the build and says where the run half waits.
#
#   bench/speed.sh [OUT]        (default OUT: /tmp/otc-speed; OTC_BIN as for
#                                speed-build.sh; PYTHON for the run half)
set -euo pipefail
out=${1:-/tmp/otc-speed}
here=$(cd "$(dirname "$0")" && pwd)
"$here/speed-build.sh" "$out"
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  "$here/speed-run.sh" "$out"
else
  echo "speed: no GPU here (nvidia-smi -L finds none): the run half awaits a GPU machine;"
  echo "  copy $out there and run $out/run.sh (see bench/README.md)"
fi
