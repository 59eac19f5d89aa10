#!/usr/bin/env python3
"""Starts N ranks of a command the way torchrun --no-python does, without
MPI: each process gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1
and MASTER_PORT (a free port), and its stdout and stderr are this one's.
Waits for every rank; when one fails, the others are ended after a grace
period (as torchrun ends a group), so a test never hangs. Exits with the
first failing rank's code, 0 when all succeed.

  launch_tcp.py -n 2 [--only 0] [--unset MASTER_ADDR] [--timeout S] -- cmd args

--only R starts rank R alone (the others never come); --unset NAME leaves
NAME out of every rank's environment.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--only", type=int, action="append", default=[])
    ap.add_argument("--unset", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--grace", type=float, default=10)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    port = free_port()
    procs = []
    for rank in range(args.n):
        if args.only and rank not in args.only:
            continue
        env = dict(os.environ)
        for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
            env.pop(name, None)
        env.update(RANK=str(rank), WORLD_SIZE=str(args.n),
                   LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        for name in args.unset:
            env.pop(name, None)
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.time() + args.timeout
    code = 0
    failed_at = None
    while any(p.poll() is None for p in procs):
        now = time.time()
        for p in procs:
            if p.poll() not in (None, 0) and failed_at is None:
                failed_at = now
        if now > deadline or (failed_at is not None and
                              now > failed_at + args.grace):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            if now > deadline:
                print("launch_tcp.py: ranks still running after %g s: killed"
                      % args.timeout, file=sys.stderr)
                code = 124
            break
        time.sleep(0.05)
    for p in procs:
        p.wait()
        if code == 0 and p.returncode != 0:
            code = p.returncode if p.returncode > 0 else 1
    return code


if __name__ == "__main__":
    sys.exit(main())
