#!/usr/bin/env python3
"""Writes a deterministic English-like text for the tests that train on token
shards (otc-data), so that their data does not change when the docs do:
sentences drawn by a seeded generator from a small grammar about training
models (a character-level model learns its spelling and word order within a
few dozen steps).

    make_corpus.py OUT [--sentences 2500] [--seed 1]
"""
import argparse
import random

SUBJECTS = ["the compiler", "the model", "the optimizer", "a kernel", "the runtime",
            "each layer", "the planner", "the graph", "every gradient", "the loss"]
VERBS = ["reads", "writes", "fuses", "plans", "keeps", "recomputes", "updates",
         "checks", "rounds", "sums"]
OBJECTS = ["the weights", "the activations", "one buffer", "the arena", "each tensor",
           "the batch", "a token", "the moments", "the logits", "every row"]
TAILS = ["in one pass", "before the step", "after the update", "on the device",
         "with care", "twice", "in order", "for the next layer", "at the end", "again"]


def sentence(rng):
    words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
    if rng.random() < 0.6:
        words.append(rng.choice(TAILS))
    if rng.random() < 0.3:
        words += ["and", rng.choice(VERBS), rng.choice(OBJECTS)]
    return " ".join(words) + "."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sentences", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lines, line = [], []
    for _ in range(a.sentences):
        line.append(sentence(rng))
        if len(line) == 4:
            lines.append(" ".join(line))
            line = []
    if line:
        lines.append(" ".join(line))
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
