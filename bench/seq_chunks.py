#!/usr/bin/env python3
"""--seq-chunks K on documents up to 1,024 tokens: peak activation memory
and step time against the same run unchunked.

`kaiten train --doc-lengths SPEC --seq-len 1024 -b 1` (the default GPT:
L=4, C=64, 4 heads; micro-batches of 1,024 tokens) at P stages, M=8, on
threads, unchunked (1f1b) and with --seq-chunks K (Seq1F1B over the
chunks), alternated run by run so the machine's drifting load hits both
alike. Per pair: the largest rank's peak activation memory (bytes, the
same in every run of a configuration) and the median step after the first
(median_step_seconds), and the CPU seconds of the last step's ops (every
stage's F and B of every micro-batch or chunk, the JSON's microbatches:
what the step computes, whatever the machine's load did to its wall time);
the table gives medians over the pairs of the chunked / unchunked ratios
(memory, step time, CPU).

Usage: bench/seq_chunks.py [--reps N] [--steps N] [--chunks K] [--stages LIST]
                           [--mixes LIST] [BUILD_DIR]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

MIXES = ["lognormal:1:16:1024", "lognormal:0:1024:1024"]


def train(kaiten, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        subprocess.run([kaiten, "train", "--no-live", "--format", "json", "-o", out] + args,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        r = json.load(open(out))
    cpu = sum(sum(m["tf"]) + sum(m["tb"]) + sum(m["tw"]) for m in r["microbatches"])
    return (max(x["peak_memory"] for x in r["ranks"]), r["median_step_seconds"], cpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--stages", default="4,2")
    ap.add_argument("--mixes", default=",".join(MIXES))
    ap.add_argument("build", nargs="?", default="build")
    a = ap.parse_args()
    kaiten = os.path.join(a.build, "kaiten")
    print("%-22s %2s %12s %12s %8s %10s %10s %7s %7s" % (
        "documents", "P", "peak MiB", "chunked MiB", "memory", "step ms", "chunked ms", "time", "cpu"))
    for mix in a.mixes.split(","):
        for p in [int(x) for x in a.stages.split(",")]:
            base = ["--doc-lengths", mix, "--seq-len", "1024", "-b", "1", "-p", str(p), "-m", "8",
                    "--steps", str(a.steps), "--val-every", "0", "--seed", "3"]
            mem, mem_k, step, step_k, ratio_m, ratio_t, ratio_c = [], [], [], [], [], [], []
            for rep in range(a.reps):
                runs = {}
                order = (1, a.chunks) if rep % 2 == 0 else (a.chunks, 1)
                for k in order:
                    runs[k] = train(kaiten, base + (["--seq-chunks", str(k)] if k > 1 else []))
                m0, s0, c0 = runs[1]
                m1, s1, c1 = runs[a.chunks]
                ratio_c.append(c1 / c0)
                mem.append(m0), mem_k.append(m1), step.append(s0), step_k.append(s1)
                ratio_m.append(m1 / m0), ratio_t.append(s1 / s0)
            print("%-22s %2d %12.2f %12.2f %7.3fx %10.1f %10.1f %6.3fx %6.3fx" % (
                mix, p, statistics.median(mem) / 2 ** 20, statistics.median(mem_k) / 2 ** 20,
                statistics.median(ratio_m), 1e3 * statistics.median(step),
                1e3 * statistics.median(step_k), statistics.median(ratio_t),
                statistics.median(ratio_c)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
