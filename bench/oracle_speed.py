#!/usr/bin/env python3
"""kaiten against the zero-bubble authors' schedulers, row by row on the two
oracle grids (tests/data/oracles: zb_heuristic.tsv, v_schedules.tsv), in
time: the authors' scheduler in-process (CPython, the call that builds the
order: `initial_solution` for the heuristic, `create_schedule` for V-Min,
V-Half and V-ZB, as tests/data/oracles/README.md runs them), a kaiten call
as a program makes it (`kaiten sim -s zb-auto|v-min|v-half|zbv-auto ...
--format json`, read from its stdout, process start included) and kaiten in-process
(build/bench/bench_oracle_rows: generate + simulate), alternated run by run
on each row, --reps rounds after a first one left out; per row the medians
and the medians of the paired ratios authors / kaiten (a call faster than
the authors: ratio > 1); and kaiten's bubble against theirs (equal or
better).

The authors' code is not part of kaiten: give a clone of
github.com/sail-sg/zero-bubble-pipeline-parallelism (--authors DIR); the
files are read at the README's commits with `git show`, and stand-ins for
torch, numpy and pulp (which the heuristic's module imports but never uses
on this path) are put ahead of them on sys.path.

usage: python3 bench/oracle_speed.py --authors CLONE [--reps 5] [--tsv OUT] [BUILD_DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLES = os.path.join(HERE, "..", "tests", "data", "oracles")
ARXIV = "f68d38794764d7d937f4942dca3a1e9a07544898"
MAIN = "39f2c186a27580b7051eb51e0f651e1efd0a8170"
SCHED = "megatron/core/pipeline_parallel/zerobubble/scheduler"

STANDINS = {
    "torch/__init__.py": "class Tensor: pass\n",
    "numpy/__init__.py": "",
    "pulp/__init__.py": "LpMinimize = LpProblem = LpStatus = LpVariable = lpDot = lpSum = None\n"
                        "from . import constants\n",
    "pulp/constants.py": "",
}


def setup_authors(clone, root):
    def show(commit, path, dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        out = subprocess.run(["git", "-C", clone, "show", f"{commit}:{path}"], check=True,
                             capture_output=True)
        open(dest, "wb").write(out.stdout)
    show(ARXIV, "megatron/core/pipeline_parallel/auto_schedule.py", os.path.join(root, "auto_schedule.py"))
    for f in ("graph.py", "zbv.py", "zbv_greedy.py"):
        show(MAIN, f"{SCHED}/{f}", os.path.join(root, SCHED, f))
    d = root
    for part in SCHED.split("/"):
        d = os.path.join(d, part)
        open(os.path.join(d, "__init__.py"), "a").close()
    for name, text in STANDINS.items():
        os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
        open(os.path.join(root, name), "w").write(text)
    sys.path.insert(0, root)


def read_tsv(path):
    cols, rows = None, []
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.rstrip("\n").split("\t")
        if cols is None:
            cols = f
        else:
            rows.append(dict(zip(cols, f)))
    return rows


def heuristic_call(row):
    """The authors' heuristic for a row (costs x100 as integers), as a
    function of no arguments that returns initial_solution's (best_time,
    order, complete_time)."""
    import auto_schedule as a
    P, M = int(row["P"]), int(row["M"])
    cfg = a.GraphConfig(cost_f=round(100 * float(row["F"])), cost_b=round(100 * float(row["B"])),
                        cost_w=round(100 * float(row["W"])), cost_comm=round(100 * float(row["comm"])),
                        mem_f=2, mem_b=-1, mem_w=-1, max_mem=int(float(row["max_mem"])))

    def run():
        g = a.Graph.build_graph(P, M, cfg)
        return a.initial_solution(g, print_result=False)
    return run


def v_call(row):
    """The authors' V scheduler for a row (setup min, half or zb; costs x100
    as integers), as a function of no arguments that returns (the
    PipelineGraph, create_schedule's per-rank lists of ScheduledNode)."""
    from megatron.core.pipeline_parallel.zerobubble.scheduler import graph, zbv, zbv_greedy
    P, M = int(row["P"]), int(row["M"])
    f, b, w, c = (round(100 * float(row[k])) for k in ("F", "B", "W", "comm"))
    config = graph.GraphConfig.basic_config(f=float(f), b=float(b), w=float(w), n_stages=P,
                                            n_micro=M, max_chunks=2)
    devnull = open(os.devnull, "w")

    def run():
        stdout, sys.stdout = sys.stdout, devnull  # create_schedule prints a line
        try:
            if row["setup"] == "zb":
                pg = zbv.PipelineGraph(P, M, f, b, w, c, 2, -1, -1, None)
            else:
                pg = zbv_greedy.PipelineGraph(P, M, row["setup"], f, b, w, c)
            return pg, pg.create_schedule(config)
        finally:
            sys.stdout = stdout
    return run


def kaiten_args(table, row):
    """The kaiten call for a row, as a user makes it."""
    args = ["-p", row["P"], "-m", row["M"], "--tf", row["F"], "--tb", row["B"], "--tw", row["W"],
            "--comm", row["comm"], "--per-stage"]
    if table == "zb_heuristic":
        return ["-s", "zb-auto", "--mem-act", "2", "--mem-wgrad", "1", "--mem-limit",
                row["max_mem"]] + args
    kind = {"min": "v-min", "half": "v-half", "zb": "zbv-auto"}[row["setup"]]
    extra = ["--mem-limit", row["mem_limit_chunks"]] if row["setup"] == "zb" else []
    wgrad = "0.5" if row["setup"] == "zb" else "1"
    return ["-s", kind, "--mem-act", "1", "--mem-wgrad", wgrad] + extra + args


def serve_calls():
    """--serve-calls: times kaiten calls one at a time for the main process,
    from this small process (forking the large Python process that holds the
    authors' modules costs milliseconds of its own): reads a JSON argument
    list per line, runs `kaiten ARGS`, and answers [seconds, stdout]."""
    for line in sys.stdin:
        args = json.loads(line)
        t0 = time.perf_counter()
        res = subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
        print(json.dumps([time.perf_counter() - t0, res.stdout]), flush=True)


class Caller:
    """The --serve-calls process. A call's wall time includes process start
    and the JSON on stdout, read by the caller. Not `-o FILE`: replacing a
    file that exists costs a rename that waits for the file system (0.35 ms
    on this machine's ext4, which flushes the new file's blocks first), a
    cost of the disk, not of the scheduler."""

    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-calls"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(self, args):
        self.p.stdin.write(json.dumps(args) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def in_process(build, table, row):
    """One run of bench_oracle_rows on one row (a warm-up run left out
    inside): seconds and bubble."""
    exe = os.path.join(build, "bench", "bench_oracle_rows")
    out = subprocess.run([exe, os.path.join(ORACLES, table + ".tsv"), "1", str(row)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[1]), float(out[2])


def time_row(caller, kaiten, build, table, row, i, reps):
    """kaiten's call, kaiten in-process and the authors' scheduler on one
    row, alternated run by run, reps + 1 rounds with the first left out:
    the medians, and the medians of the paired ratios authors / kaiten."""
    authors = (heuristic_call if table == "zb_heuristic" else v_call)(row)
    args = [kaiten, "sim"] + kaiten_args(table, row) + ["--format", "json"]
    call, inproc, theirs, start, res, bubble = [], [], [], [], None, None
    for k in range(reps + 1):
        t_start, _ = caller.call([kaiten, "sim", "--help"])
        t_call, out = caller.call(args)
        t_in, bubble = in_process(build, table, i)
        t0 = time.perf_counter()
        authors()
        t_authors = time.perf_counter() - t0
        if k:
            start.append(t_start), call.append(t_call), inproc.append(t_in)
            theirs.append(t_authors)
        res = json.loads(out)
    med = statistics.median
    return dict(authors=med(theirs), call=med(call), inproc=med(inproc), start=med(start),
                call_ratio=med([a / c for a, c in zip(theirs, call)]),
                inproc_ratio=med([a / c for a, c in zip(theirs, inproc)]),
                bubble=res["bubble_ratio"], inproc_bubble=bubble)


def main():
    if sys.argv[1:] == ["--serve-calls"]:
        return serve_calls()
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("--authors", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tsv")
    ap.add_argument("build", nargs="?", default="build")
    o = ap.parse_args()
    kaiten = os.path.abspath(os.path.join(o.build, "kaiten"))
    lines, starts = [], []
    caller = Caller()  # before the authors' modules load: a small process spawns the calls
    with tempfile.TemporaryDirectory() as tmp:
        setup_authors(o.authors, tmp)
        for table in ("zb_heuristic", "v_schedules"):
            for i, row in enumerate(read_tsv(os.path.join(ORACLES, table + ".tsv"))):
                t = time_row(caller, kaiten, o.build, table, row, i, o.reps)
                starts.append(t["start"])
                what = kaiten_args(table, row)[1]
                line = (table, i, row["P"], row["M"], row["cost_set"], what, t["authors"],
                        t["call"], t["inproc"], t["bubble"], float(row["bubble_ratio"]),
                        t["call_ratio"], t["inproc_ratio"])
                lines.append(line)
                print("%-12s %3d P=%-3s M=%-4s %s %-9s authors %8.2f ms  kaiten call %7.2f ms "
                      "(authors/call x%.2f)  in-process %8.3f ms (x%.1f)  bubble %.6f vs %.6f" %
                      (table, i, row["P"], row["M"], row["cost_set"], what, 1e3 * t["authors"],
                       1e3 * t["call"], t["call_ratio"], 1e3 * t["inproc"], t["inproc_ratio"],
                       line[9], line[10]), flush=True)
    caller.close()
    if o.tsv:
        with open(o.tsv, "w") as f:
            f.write("table\trow\tP\tM\tcost_set\tschedule\tauthors_s\tkaiten_call_s\t"
                    "kaiten_inprocess_s\tkaiten_bubble\tauthors_bubble\tauthors_per_call\t"
                    "authors_per_inprocess\n")
            for l in lines:
                f.write("\t".join(str(x) for x in l) + "\n")
    print(f"\nprocess start (kaiten sim --help): {1e3 * statistics.median(starts):.2f} ms median")
    print("per row, medians of the paired ratios authors / kaiten:")
    for what in ("zb-auto", "zbv-auto", "v-min", "v-half"):
        ls = [l for l in lines if l[5] == what]
        print(f"  {what:9s} {len(ls)} rows: equal or better bubble on "
              f"{sum(l[9] <= l[10] + 1e-4 for l in ls)}, call faster on "
              f"{sum(l[11] > 1 for l in ls)}, in-process >= 10x on {sum(l[12] >= 10 for l in ls)}; "
              f"median authors / in-process {statistics.median(l[12] for l in ls):.1f}, "
              f"authors / call {statistics.median(l[11] for l in ls):.2f}")
    for l in sorted(lines, key=lambda l: l[11])[:5]:
        print(f"  slowest vs authors: {l[0]} row {l[1]} P={l[2]} M={l[3]} {l[5]}: "
              f"{1e3 * l[7]:.2f} ms vs {1e3 * l[6]:.2f} ms (paired ratio {l[11]:.2f})")


if __name__ == "__main__":
    main()
