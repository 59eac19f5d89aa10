#!/usr/bin/env python3
"""Sends a train run signals as a user or a scheduler would, and prints what
came of it.

  interrupt_run.py SIGNAL [--again] [--log FILE] -- TRAIN ARGS...

SIGNAL is INT, TERM or KILL. The run starts with SIGINT at its default
action (a background job of a shell would inherit it ignored) and with
OTC_TEST_SAVE_PAUSE=1 when --again or --log is given (its first checkpoint
write then pauses before its rename, printing "paused before rename" on
stderr, and sleeps for 600 s).

Without --log the run's stdout is read line by line and SIGNAL is sent once
the first step line has arrived; every stdout line is echoed. With --again
the same signal is sent a second time once the run pauses in the save that
the first one started, and the script says whether the run then ended within
10 s. With --log FILE the run's stdout goes to FILE and SIGNAL is sent once
the run pauses in its first save; the script then prints FILE.

Prints "rc N" (the exit status; -N: killed by signal N) and the run's stderr
lines that start with "otc train:". Exits 1 when the run did not end within
120 s of the signal (it is then killed) or never reached the point to send
it."""
import os
import signal
import subprocess
import sys
import threading
import time


def main():
    args = sys.argv[1:]
    cut = args.index("--")
    opts, cmd = args[:cut], args[cut + 1:]
    sig = getattr(signal, "SIG" + opts[0])
    again = "--again" in opts
    log = opts[opts.index("--log") + 1] if "--log" in opts else None
    env = dict(os.environ)
    if again or log:
        env["OTC_TEST_SAVE_PAUSE"] = "1"
    out = open(log, "w") if log else subprocess.PIPE
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.PIPE, env=env, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    paused = threading.Event()
    errors = []

    def read_stderr():
        for line in proc.stderr:
            if "paused before rename" in line:
                paused.set()
            if line.startswith("otc train:"):
                errors.append(line.rstrip("\n"))

    reader = threading.Thread(target=read_stderr)
    reader.start()
    sent = False
    if log:
        if paused.wait(120):
            proc.send_signal(sig)
            sent = True
    else:
        for line in proc.stdout:
            print(line, end="")
            if not sent and line.startswith("step "):
                proc.send_signal(sig)
                sent = True
                if again:
                    break
        if again and sent:
            if paused.wait(120):
                start = time.monotonic()
                proc.send_signal(sig)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
                print(f"ended within 10 s of the second signal: "
                      f"{proc.poll() is not None and time.monotonic() - start < 10}")
            for line in proc.stdout:
                print(line, end="")
    try:
        rc = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    reader.join()
    print(f"rc {rc}")
    for line in errors:
        print(line)
    if log:
        out.close()
        with open(log) as f:
            print(f.read(), end="")
    return 0 if sent and rc is not None else 1


if __name__ == "__main__":
    sys.exit(main())
