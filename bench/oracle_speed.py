#!/usr/bin/env python3
"""kaiten against the zero-bubble authors' schedulers, row by row on the two
oracle grids (tests/data/oracles: zb_heuristic.tsv, v_schedules.tsv), in
time: the authors' scheduler in-process (CPython, the call that builds the
order: `initial_solution` for the heuristic, `create_schedule` for V-Min,
V-Half and V-ZB, as tests/data/oracles/README.md runs them), a kaiten call
as a program makes it (`kaiten sim -s zb-auto|v-min|v-half|zbv-auto ...
--format json`, read from its stdout, process start included) and kaiten in-process
(build/bench/bench_oracle_rows: generate + simulate), each the median of
--reps runs; and kaiten's bubble against theirs (equal or better).

The authors' code is not part of kaiten: give a clone of
github.com/sail-sg/zero-bubble-pipeline-parallelism (--authors DIR); the
files are read at the README's commits with `git show`, and stand-ins for
torch, numpy and pulp (which the heuristic's module imports but never uses
on this path) are put ahead of them on sys.path.

usage: python3 bench/oracle_speed.py --authors CLONE [--reps 5] [--tsv OUT] [BUILD_DIR]
"""
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


def median_time(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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


def authors_heuristic(row, reps):
    return median_time(heuristic_call(row), reps)


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


def authors_v(row, reps):
    return median_time(v_call(row), reps)


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


def time_calls():
    """--time-calls: reads [kaiten, reps, [args...]...] as JSON on stdin and
    prints [[median seconds, json result]...]: the calls are timed from
    this small process, not from the one that holds the authors' modules
    (forking a large Python process costs milliseconds of its own)."""
    kaiten, reps, calls = json.load(sys.stdin)
    out = []
    starts = []  # a process that does next to nothing, alternated with the calls
    for args in calls:
        t0 = time.perf_counter()
        subprocess.run([kaiten, "sim", "--help"], check=True, stdout=subprocess.PIPE)
        starts.append(time.perf_counter() - t0)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            res = subprocess.run([kaiten, "sim"] + args + ["--format", "json"], check=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        out.append([statistics.median(times), json.loads(res.stdout)])
    json.dump({"start": statistics.median(starts), "calls": out}, sys.stdout)


def kaiten_calls(kaiten, calls, reps):
    """Each call's median wall time (process start and the JSON on stdout,
    read by the caller, included) and its result. Not `-o FILE`: replacing a
    file that exists costs a rename that waits for the file system (0.35 ms
    on this machine's ext4, which flushes the new file's blocks first), a
    cost of the disk, not of the scheduler."""
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--time-calls"],
                         input=json.dumps([kaiten, reps, calls]), capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout)


def in_process(build, table, reps):
    """bench_oracle_rows: one line per row, 'index seconds bubble'."""
    exe = os.path.join(build, "bench", "bench_oracle_rows")
    out = subprocess.run([exe, os.path.join(ORACLES, table + ".tsv"), str(reps)], check=True,
                         capture_output=True, text=True).stdout
    return {int(l.split()[0]): float(l.split()[1]) for l in out.splitlines() if l and l[0].isdigit()}


def main():
    args = sys.argv[1:]
    if args == ["--time-calls"]:
        return time_calls()
    clone, reps, build, tsv = None, 5, "build", None
    while args:
        a = args.pop(0)
        if a == "--authors":
            clone = args.pop(0)
        elif a == "--reps":
            reps = int(args.pop(0))
        elif a == "--tsv":
            tsv = args.pop(0)
        else:
            build = a
    if not clone:
        sys.exit(__doc__)
    kaiten = os.path.abspath(os.path.join(build, "kaiten"))
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        calls = {}  # before the authors' modules load: a small process spawns them
        for table in ("zb_heuristic", "v_schedules"):
            rows = read_tsv(os.path.join(ORACLES, table + ".tsv"))
            timed = kaiten_calls(kaiten, [kaiten_args(table, r) for r in rows], reps)
            calls[table] = timed["calls"]
            print(f"{table}: process start (kaiten sim --help) {1e3 * timed['start']:.2f} ms median",
                  flush=True)
        setup_authors(clone, tmp)
        for table in ("zb_heuristic", "v_schedules"):
            inproc = in_process(build, table, reps)
            for i, row in enumerate(read_tsv(os.path.join(ORACLES, table + ".tsv"))):
                theirs = (authors_heuristic if table == "zb_heuristic" else authors_v)(row, reps)
                args2 = kaiten_args(table, row)
                call, res = calls[table][i]
                what = args2[1]
                line = (table, i, row["P"], row["M"], row["cost_set"], what, theirs, call,
                        inproc.get(i, float("nan")), res["bubble_ratio"], float(row["bubble_ratio"]))
                lines.append(line)
                print("%-12s %3d P=%-3s M=%-4s %s %-9s authors %8.2f ms  kaiten call %7.2f ms "
                      "(x%.2f)  in-process %8.3f ms (x%.1f faster)  bubble %.6f vs %.6f" %
                      (table, i, row["P"], row["M"], row["cost_set"], what, 1e3 * theirs,
                       1e3 * call, call / theirs, 1e3 * line[8], theirs / line[8],
                       line[9], line[10]), flush=True)
    if tsv:
        with open(tsv, "w") as f:
            f.write("table\trow\tP\tM\tcost_set\tschedule\tauthors_s\tkaiten_call_s\t"
                    "kaiten_inprocess_s\tkaiten_bubble\tauthors_bubble\n")
            for l in lines:
                f.write("\t".join(str(x) for x in l) + "\n")
    slower = [l for l in lines if l[7] >= l[6]]
    not10 = [l for l in lines if l[8] * 10 > l[6]]
    worse = [l for l in lines if l[9] > l[10] + 1e-4]
    print(f"\n{len(lines)} rows: kaiten call slower than the authors on {len(slower)}, "
          f"in-process less than 10x faster on {len(not10)}, bubble worse on {len(worse)}")
    for l in sorted(lines, key=lambda l: l[7] / l[6])[-5:]:
        print(f"  slowest vs authors: {l[0]} row {l[1]} P={l[2]} M={l[3]} {l[5]}: "
              f"{1e3 * l[7]:.2f} ms vs {1e3 * l[6]:.2f} ms")


if __name__ == "__main__":
    main()
