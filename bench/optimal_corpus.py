#!/usr/bin/env python3
"""The exact search on the corpus, as a user runs it: for each problem of
tests/data/optimal_corpus.tsv (scripts/optimal_corpus.py), `kaiten sim
--schedule optimal --time-limit T --format json` (one at a time, so the
search has a core to itself on a 2-core machine), and zb-auto (zbv-auto for
V = 2) on the same problem. Prints each row, then the summary the issue
asks for: how many are proven within T, how far zb-auto is from the
optimum, and whether the lower bound `sim` prints equals the optimum on the
uniform-cost rows (and the analytic bound alone).

usage: python3 bench/optimal_corpus.py [--time-limit 60] [--record]
                                       [--results FILE] [--only N,N..] [BUILD_DIR]
  --record   write each proven row's optimum into the corpus file (its
             `optimum` column: tests/test_optimal.c checks a subset)
  --results  the per-row table (default bench/optimal_corpus_results.tsv)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "data", "optimal_corpus.tsv")


def read_corpus(path):
    head, rows, cols = [], [], None
    for line in open(path):
        if line.startswith("#"):
            head.append(line)
            continue
        f = line.rstrip("\n").split("\t")
        if cols is None:
            cols = f
            continue
        rows.append(dict(zip(cols, f + [""] * (len(cols) - len(f)))))
    return head, cols, rows


def sim(kaiten, row, schedule, extra):
    cmd = [kaiten, "sim", "-s", schedule, "-p", row["p"], "-m", row["m"], "-v", row["v"],
           "--tf", row["tf"], "--tb", row["tb"], "--tw", row["tw"], "--comm", row["comm"],
           "--mem-act", row["mem_act"], "--mem-wgrad", row["mem_wgrad"],
           "--mem-limit", row["mem_limit"], "--format", "json"] + extra
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout), wall


def main():
    args = sys.argv[1:]
    limit, record, build, only = 60.0, False, "build", None
    results = os.path.join(HERE, "optimal_corpus_results.tsv")
    while args:
        a = args.pop(0)
        if a == "--time-limit":
            limit = float(args.pop(0))
        elif a == "--record":
            record = True
        elif a == "--results":
            results = args.pop(0)
        elif a == "--only":
            only = {int(x) for x in args.pop(0).split(",")}
        else:
            build = a
    kaiten = os.path.join(build, "kaiten")
    head, cols, rows = read_corpus(CORPUS)
    out_rows = []
    print("id  P V M u  optimum  proven  seconds  gap%   zb-auto  zb-gap%  bound  analytic")
    for row in rows:
        if only is not None and int(row["id"]) not in only:
            continue
        opt, wall = sim(kaiten, row, "optimal", ["--time-limit", str(limit)])
        zb, _ = sim(kaiten, row, "zb-auto" if row["v"] == "1" else "zbv-auto", [])
        ms, lb = opt["makespan"], opt["lower_bound"]
        r = {"id": row["id"], "p": row["p"], "v": row["v"], "m": row["m"],
             "uniform": row["uniform"], "optimum": ms, "proven": int(opt["proven"]),
             "lower": lb, "gap": opt["gap"], "seconds": opt["search"]["seconds"],
             "wall": wall, "nodes": opt["search"]["nodes"], "zb": zb["makespan"],
             "zb_gap": zb["makespan"] / ms - 1, "zb_bound": zb["lower_bound"],
             "zb_bound_from": zb.get("lower_bound_from", ""),
             "analytic": zb["lower_bound"] if zb.get("lower_bound_from") == "analytic" else ""}
        out_rows.append(r)
        if record and r["proven"]:
            row["optimum"] = f"{ms:.12g}"
        print(f"{r['id']:>3} {r['p']} {r['v']} {r['m']} {r['uniform']} {ms:9.6g} {r['proven']:>5} "
              f"{r['seconds']:8.3f} {100 * r['gap']:5.2f} {r['zb']:9.6g} {100 * r['zb_gap']:7.3f} "
              f"{r['zb_bound']:8.6g} {r['zb_bound_from']}", flush=True)
    keys = list(out_rows[0].keys()) if out_rows else []
    with open(results, "w") as f:
        f.write(f"# bench/optimal_corpus.py --time-limit {limit:g}, {time.strftime('%Y-%m-%d %H:%M')}"
                f" UTC, load {os.getloadavg()[0]:.2f}\n")
        f.write("\t".join(keys) + "\n")
        for r in out_rows:
            f.write("\t".join(f"{r[k]:.12g}" if isinstance(r[k], float) else str(r[k])
                              for k in keys) + "\n")
    if record:
        tmp = CORPUS + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(head)
            f.write("\t".join(cols) + "\n")
            for row in rows:
                f.write("\t".join(row[c] for c in cols) + "\n")
        os.replace(tmp, CORPUS)
    summary(out_rows, limit)


def summary(rows, limit):
    n = len(rows)
    proven = [r for r in rows if r["proven"]]
    within = [r for r in proven if r["wall"] <= limit + 5]
    zb1 = [r for r in proven if r["zb_gap"] <= 0.01 + 1e-9]
    zb3 = [r for r in proven if r["zb_gap"] <= 0.03 + 1e-9]
    uni = [r for r in proven if r["uniform"] == "1"]
    tight = [r for r in uni if abs(r["zb_bound"] - r["optimum"]) <= 1e-9 * (1 + r["optimum"])]
    print(f"\nproven optimal: {len(proven)} of {n} ({100 * len(proven) / max(n, 1):.1f}%), "
          f"{len(within)} within {limit:g} s (slowest proof "
          f"{max([r['seconds'] for r in proven] or [0]):.2f} s)")
    for v in ("1", "2"):
        pv = [r for r in proven if r["v"] == v]
        nv = len([r for r in rows if r["v"] == v])
        print(f"  V={v}: {len(pv)} of {nv}")
    print(f"zb-auto within 1% of the optimum: {len(zb1)} of {len(proven)} proven "
          f"({100 * len(zb1) / max(len(proven), 1):.1f}%); within 3%: {len(zb3)}; largest gap "
          f"{100 * max([r['zb_gap'] for r in proven] or [0]):.2f}%; equal: "
          f"{len([r for r in proven if r['zb_gap'] <= 1e-9])}")
    print(f"lower bound sim prints = the optimum on {len(tight)} of {len(uni)} proven uniform-cost "
          f"rows (analytic alone on "
          f"{len([r for r in tight if r['zb_bound_from'] == 'analytic'])})")


if __name__ == "__main__":
    main()
