#!/usr/bin/env python3
"""What the front's C library costs a call (bench/README.md, "Against the
zero-bubble authors' schedulers"): an empty static program linked against
glibc and against musl, and `kaiten sim` on a P=4, M=4 heuristic-grid row
(--format json, read from stdout) from a build with the musl front and one
with the glibc front (cmake -DKT_MUSL_FRONT=OFF), alternated run by run;
then `kaiten sim -s NAME -p 64 -m 1024` (default output) from both builds,
alternated. Prints medians and the medians of the paired ratios.

usage: front_start.py [--rounds N] [--big-rounds N] MUSL_BUILD GLIBC_BUILD
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
BIG = ["zbv-auto", "interleaved-zb", "zbv"]


def wall(args):
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def empty_programs(tmp):
    """An empty static program built with gcc and with musl-gcc."""
    src = os.path.join(tmp, "empty.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 0; }\n")
    out = {}
    for name, cc in (("glibc", "gcc"), ("musl", "musl-gcc")):
        exe = os.path.join(tmp, "empty-" + name)
        subprocess.run([cc, "-O2", "-static", "-o", exe, src], check=True)
        out[name] = exe
    return out


def alternate(cmds, rounds):
    """Each command once per round, in turn; the first round left out."""
    times = {k: [] for k in cmds}
    for r in range(rounds + 1):
        for k, args in cmds.items():
            t = wall(args)
            if r:
                times[k].append(t)
    return times


def paired(a, b):
    return statistics.median([x / y for x, y in zip(a, b)])


def main():
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--big-rounds", type=int, default=11)
    ap.add_argument("musl_build")
    ap.add_argument("glibc_build")
    a = ap.parse_args()
    musl = os.path.join(a.musl_build, "kaiten")
    glibc = os.path.join(a.glibc_build, "kaiten")
    with tempfile.TemporaryDirectory() as tmp:
        empty = empty_programs(tmp)
        t = alternate({"empty glibc": [empty["glibc"]], "empty musl": [empty["musl"]],
                       "kaiten musl front": [musl] + SMALL, "kaiten glibc front": [glibc] + SMALL},
                      a.rounds)
    print(f"{a.rounds} rounds, medians (ms):")
    for k, v in t.items():
        print(f"  {k:20s} {1e3 * statistics.median(v):7.3f}")
    print(f"  paired musl / glibc: empty {paired(t['empty musl'], t['empty glibc']):.3f}, "
          f"kaiten {paired(t['kaiten musl front'], t['kaiten glibc front']):.3f}")
    print(f"P=64, M=1024, default output, {a.big_rounds} rounds, medians (ms):")
    for name in BIG:
        args = ["sim", "-s", name, "-p", "64", "-m", "1024"]
        t = alternate({"musl": [musl] + args, "glibc": [glibc] + args}, a.big_rounds)
        print(f"  {name:15s} musl {1e3 * statistics.median(t['musl']):6.1f}  "
              f"glibc {1e3 * statistics.median(t['glibc']):6.1f}  "
              f"paired musl / glibc {paired(t['musl'], t['glibc']):.3f}")


if __name__ == "__main__":
    sys.exit(main())
