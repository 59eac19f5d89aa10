#!/usr/bin/env python3
"""Kills a train run with SIGKILL in the middle of a checkpoint save and
checks what it leaves: runs TRAIN ARGS... with OTC_TEST_SAVE_PAUSE=N (the
N-th atomic file write pauses between writing its temporary file and the
rename), waits for the pause message on stderr, sends SIGKILL, and prints
what the save root ROOT holds: where 'latest' points, and the leftover
temporary files. Exits 1 if the run did not pause."""
import os
import signal
import subprocess
import sys


def main():
    pause, root, *cmd = sys.argv[1:]
    env = dict(os.environ, OTC_TEST_SAVE_PAUSE=pause)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, text=True)
    paused = False
    for line in proc.stderr:
        if "paused before rename" in line:
            paused = True
            break
    proc.send_signal(signal.SIGKILL)
    rc = proc.wait()
    print(f"killed: rc {rc}, paused {paused}")
    print("latest ->", os.readlink(os.path.join(root, "latest")))
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if os.path.isdir(path) and not os.path.islink(path):
            print(d, sorted(os.listdir(path)))
    return 0 if paused else 1


if __name__ == "__main__":
    sys.exit(main())
