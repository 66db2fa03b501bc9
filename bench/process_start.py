#!/usr/bin/env python3
"""What a `kaiten` call costs beyond its work, and what it costs in all,
against another build (bench/README.md, "Process start"), run by run:

1. process start: `kaiten sim --help` of both builds and an empty program
   linked against glibc (the floor any such program pays), and `kaiten sim`
   on a P=4, M=4 heuristic-grid row (--format json, read from stdout);
2. `kaiten sim -s NAME -p 64 -m 1024` (default output) for every built-in
   schedule from both builds, each beside its build's `sim --help`: the
   medians, the medians of the paired differences (the call beyond process
   start, which the 100 ms target is on) and of the paired ratios
   BUILD / BASE.

Each command runs once per round, in turn; the first round is left out.

usage: process_start.py [--rounds N] [--big-rounds N] [--schedules a,b] BASE_BUILD BUILD
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SMALL = ["sim", "-s", "zb-auto", "--mem-act", "2", "--mem-wgrad", "1", "--mem-limit", "16",
         "-p", "4", "-m", "4", "--tf", "2", "--tb", "1.5", "--tw", "1.2", "--comm", "0.3",
         "--per-stage", "--format", "json"]
SCHEDULES = ["gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "dualpipev",
             "zb-auto", "zbv-auto", "interleaved-zb", "v-half", "v-min"]
HELP = ["sim", "--help"]


def wall(args):
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def empty_program(tmp):
    """An empty program, dynamically linked against glibc."""
    src = os.path.join(tmp, "empty.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 0; }\n")
    exe = os.path.join(tmp, "empty")
    subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


def alternate(cmds, rounds):
    """Each command once per round, in turn; the first round left out."""
    times = {k: [] for k in cmds}
    for r in range(rounds + 1):
        for k, args in cmds.items():
            t = wall(args)
            if r:
                times[k].append(t)
    return times


def med(v):
    return 1e3 * statistics.median(v)


def paired(a, b, op):
    return statistics.median([op(x, y) for x, y in zip(a, b)])


def main():
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--big-rounds", type=int, default=11)
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("base_build")
    ap.add_argument("build")
    a = ap.parse_args()
    base = os.path.join(a.base_build, "kaiten")
    new = os.path.join(a.build, "kaiten")
    with tempfile.TemporaryDirectory() as tmp:
        t = alternate({"empty program (glibc)": [empty_program(tmp)],
                       "base sim --help": [base] + HELP, "sim --help": [new] + HELP,
                       "base sim row 5": [base] + SMALL, "sim row 5": [new] + SMALL},
                      a.rounds)
    print(f"{a.rounds} rounds, medians (ms):")
    for k, v in t.items():
        print(f"  {k:22s} {med(v):7.3f}")
    print(f"  paired sim --help - empty program: "
          f"{1e3 * paired(t['sim --help'], t['empty program (glibc)'], float.__sub__):.3f} ms; "
          f"ratios build / base: sim --help "
          f"{paired(t['sim --help'], t['base sim --help'], float.__truediv__):.2f}, row 5 "
          f"{paired(t['sim row 5'], t['base sim row 5'], float.__truediv__):.2f}")
    print(f"P=64, M=1024, default output, {a.big_rounds} rounds, medians (ms); beyond start: "
          "the median of the paired differences with the build's sim --help")
    print(f"  {'schedule':15s} {'base':>7s} {'build':>7s} {'base beyond':>12s} "
          f"{'build beyond':>13s} {'build/base':>10s}")
    for name in a.schedules.split(","):
        args = ["sim", "-s", name, "-p", "64", "-m", "1024"]
        t = alternate({"base": [base] + args, "base help": [base] + HELP,
                       "build": [new] + args, "build help": [new] + HELP}, a.big_rounds)
        sub = float.__sub__
        print(f"  {name:15s} {med(t['base']):7.1f} {med(t['build']):7.1f} "
              f"{1e3 * paired(t['base'], t['base help'], sub):12.1f} "
              f"{1e3 * paired(t['build'], t['build help'], sub):13.1f} "
              f"{paired(t['build'], t['base'], float.__truediv__):10.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
