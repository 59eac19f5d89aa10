"""Checks of `otc-compile --sparse-prediction=K` programs on their
`train --dump-grads` dumps.

    check_sparse.py rows DUMP --k K [--targets NAME]
        every row of the fed targets counts at most K positions (not -100);
        prints the most counted and how many rows reach K
    check_sparse.py same DUMP_A DUMP_B
        the same rows fed, and the loss and every gradient within 1e-5
        (relative, per tensor): a program whose loss is at K positions per
        sequence against one whose loss is at every position
    check_sparse.py batch DUMP OUT [--all-counted]
        a --batch file of the rows DUMP fed (every target counted with
        --all-counted: the shard's next tokens)
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

IGNORE = -100


def rows(a):
    t = st_io.read(a.dump)["input/" + a.targets]
    counted = (t != IGNORE).sum(axis=1)
    top = int(counted.max())
    print("rows: %d, the most counted %d, %d at %d: %s" %
          (len(counted), top, int((counted == a.k).sum()), a.k,
           "PASS" if top <= a.k and counted.min() > 0 else "FAIL"))


def same(a):
    x, y = st_io.read(a.dump), st_io.read(a.other)
    fed = [k for k in x if k.startswith("input/")]
    ok = sorted(fed) == sorted(k for k in y if k.startswith("input/")) and all(
        np.array_equal(x[k], y[k]) for k in fed)
    print("rows fed: %s" % ("the same" if ok else "DIFFERENT"))
    lx, ly = float(x["loss"]), float(y["loss"])
    print("loss: %.6f, %.6f: %s" % (lx, ly,
                                    "PASS" if abs(lx - ly) <= 1e-5 * abs(lx)
                                    else "FAIL"))
    grads = [k for k in x if k.startswith("grad")]
    bad = [k for k in grads if k not in y or
           np.abs(x[k].astype(np.float64) - y[k]).max() >
           1e-5 * max(np.abs(x[k]).max(), 1e-30)]
    print("gradients: %d of %d within 1e-5: %s" %
          (len(grads) - len(bad), len(grads), "FAIL " + " ".join(bad)
           if bad or not grads else "PASS"))


def batch(a):
    d = st_io.read(a.dump)
    out = {k[len("input/"):]: v for k, v in d.items() if k.startswith("input/")}
    if a.all_counted:
        ids = out["input_ids"]
        out["targets"] = np.concatenate([ids[:, 1:], ids[:, :1]], axis=1)
    st_io.write(a.out, out)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("rows")
    r.add_argument("dump")
    r.add_argument("--k", type=int, required=True)
    r.add_argument("--targets", default="targets")
    s = sub.add_parser("same")
    s.add_argument("dump")
    s.add_argument("other")
    b = sub.add_parser("batch")
    b.add_argument("dump")
    b.add_argument("out")
    b.add_argument("--all-counted", action="store_true")
    a = p.parse_args()
    {"rows": rows, "same": same, "batch": batch}[a.what](a)


if __name__ == "__main__":
    main()
