# shellcheck shell=bash
# The GPU tests' tally, sourced by run.sh (build.sh copies it next to it):
# every check prints exactly one line, PASS, FAIL or SKIP (a check that
# cannot run here, with why), and is counted against the number of checks
# run.sh expects (expect), so that a check that printed nothing or a run
# cut short fails too. test/gpu/tally.test checks it on the cpu.
tally_pass=0 tally_fail=0 tally_skip=0 tally_expected=0

expect() { tally_expected=$((tally_expected + $1)); } # expect N
pass() { echo "PASS $*"; tally_pass=$((tally_pass + 1)); }
fail() { echo "FAIL $*"; tally_fail=$((tally_fail + 1)); }
skip() { echo "SKIP $*"; tally_skip=$((tally_skip + 1)); }
# fail_all WHY LABEL...: one FAIL line per LABEL, each ending with WHY.
fail_all() { local why=$1 label; shift; for label; do fail "$label: $why"; done; }
# skip_all WHY LABEL...: one SKIP line per LABEL, each ending with WHY.
skip_all() { local why=$1 label; shift; for label; do skip "$label: $why"; done; }

# The final line: the counts, and the checks reported against those
# expected. Returns 0 when none failed and every expected check reported
# (no more, no fewer), else 1.
tally_summary() {
  local reported=$((tally_pass + tally_fail + tally_skip)) verdict=ok
  if ((tally_fail > 0)); then
    verdict=FAILED
  fi
  if ((reported != tally_expected)); then
    verdict="FAILED ($reported checks reported, $tally_expected expected)"
  fi
  echo "gpu tests: $tally_pass passed, $tally_fail failed, $tally_skip skipped," \
       "$reported of $tally_expected checks: $verdict"
  [[ $verdict == ok ]]
}
