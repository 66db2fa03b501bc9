#!/usr/bin/env python3
"""Writes the corpus of small problems the exact search (`kaiten sim
--schedule optimal`) is measured on: tests/data/optimal_corpus.tsv.

Each row is one problem: P ranks (2-4), V chunks per rank (1: loop
placement, 2: v placement), M micro-batches (1-6), per-stage costs
(T_F, T_B, T_W), a hop time, per-stage memory (M_B, M_W <= M_B) and a memory
limit per rank, drawn from a fixed seed so the file is the same on every
run. A quarter of the rows have uniform costs (the same T_F, T_B, T_W and
memory on every stage): on those the lower bound must equal the optimum.
The column `optimum` is left empty here; bench/optimal_corpus.sh --record
fills it from a full run (every proven row), and tests/test_optimal.c
checks a fast subset against it.

usage: scripts/optimal_corpus.py [OUT.tsv]   (default tests/data/optimal_corpus.tsv)
"""
import os
import random
import sys

SEED = 39
# (V, rows per (P, M)) over P = 2..4, M = 1..6: 18 sizes each
PLAN = [(1, 8), (2, 4)]
COLUMNS = ["id", "p", "v", "m", "tf", "tb", "tw", "comm", "mem_act", "mem_wgrad",
           "mem_limit", "uniform", "optimum"]


def cost(rng):
    """A cost between 0.5 and 2, log-uniform, two decimals."""
    return round(0.5 * 4 ** rng.random(), 2)


def stage_ranks(p, v):
    if v == 1:
        return list(range(p))
    return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]


def problem(rng, p, v, m, uniform):
    S = p * v
    if uniform:
        tf, tb, tw = ([x] * S for x in (cost(rng), cost(rng), cost(rng)))
        act = [1.0] * S
        wg = [round(rng.choice([0, 0.25, 0.5]), 2)] * S
    else:
        tf, tb, tw = ([cost(rng) for _ in range(S)] for _ in range(3))
        act = [round(rng.uniform(0.5, 1.5), 2) for _ in range(S)]
        wg = [round(a * rng.choice([0, 0.25, 0.5, 0.75]), 2) for a in act]
    comm = 0.0 if rng.random() < 0.4 else round(rng.uniform(0.01, 0.5), 2)
    # the least limit any order needs (one micro-batch through: every chunk
    # of a rank holds its activation at once), up to 1.5x 1F1B's memory
    ranks = stage_ranks(p, v)
    held = [sum(act[s] for s in range(S) if ranks[s] == r) for r in range(p)]
    least = max(held)
    most = 1.5 * p * max(held)
    limit = round(least + (most - least) * rng.random() ** 1.5, 2)
    limit = max(limit, least)
    return tf, tb, tw, comm, act, wg, limit


def fmt(xs):
    return ",".join(f"{x:g}" for x in xs)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "optimal_corpus.tsv")
    rng = random.Random(SEED)
    rows = []
    for v, per in PLAN:
        for p in range(2, 5):
            for m in range(1, 7):
                for k in range(per):
                    uniform = k % 4 == 0
                    tf, tb, tw, comm, act, wg, limit = problem(rng, p, v, m, uniform)
                    rows.append([len(rows), p, v, m, fmt(tf), fmt(tb), fmt(tw), f"{comm:g}",
                                 fmt(act), fmt(wg), f"{limit:g}", int(uniform), ""])
    with open(out, "w") as f:
        f.write("# kaiten optimal corpus: scripts/optimal_corpus.py (seed %d); optimum from "
                "bench/optimal_corpus.sh --record\n" % SEED)
        f.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    print(f"{out}: {len(rows)} problems")


if __name__ == "__main__":
    main()
