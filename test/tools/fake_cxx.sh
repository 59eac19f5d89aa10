#!/bin/sh
# A stand-in for the host compiler (CXX) in otc-compile-staged.test: writes
# a partial program where -o says, as a compiler stopped midway leaves one,
# then exits 1, or with FAKE_CXX=term sends its parent (otc-compile) SIGTERM
# first, as a user stopping the build would.
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then echo partial > "$2"; fi
  shift
done
if [ "$FAKE_CXX" = term ]; then
  kill -TERM "$PPID"
fi
exit 1
