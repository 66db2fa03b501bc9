#!/usr/bin/env python3
"""kaiten's searched schedules against the zero-bubble authors' schedulers
on a seeded random grid of problems that are not on the public oracle
tables (tests/data/oracles):

* heuristic rows: the authors' `initial_solution()` (auto_schedule.py at
  f68d387, 1 stage per rank) against `kaiten sim -s zb-auto`, P in
  {3,5,6,8,12}, M spread over [P, 6P], integer costs F, B, W in [50,300]
  and comm in [0,40] (the x100 scale of the oracle README; kaiten gets the
  values /100), memory M_B=2, M_W=1 with max_mem in {P*M_B, 1.5*P*M_B
  rounded to an even number, 2*P*M_B};
* V-ZB rows: the authors' `zbv.PipelineGraph(...).create_schedule()` (main
  at 39f2c18, 2 chunks per rank in V placement, f_mem=2, b_mem=w_mem=-1 and
  its default limit of 2P chunk activations) against `kaiten sim -s
  zbv-auto --mem-act 1 --mem-wgrad 0.5 --mem-limit 2P`, P in {3,5,6,8}, M in
  {2P,3P,4P} and a few M < 2P.

The authors' makespan is the value their code reports (heuristic:
best_time; V-ZB: 2M(F+B+W) + the smallest max stage bubble of the four
try_v_schedule runs that create_schedule chooses from). Their per-rank order
is also written as a kaiten text schedule and timed by `kaiten sim
--schedule-file` (column authors_order_makespan): the two must agree, so
both sides are measured with the same semantics (makespan = max over ranks
of the end of its last op - the start of its first). kaiten's makespan is
the `makespan` of `kaiten sim ... --format json`, in the default search
and, when `kaiten sim --help` lists it, with --thorough.

Before the grid, a few rows of each public table are re-run and must
reproduce the table's authors' makespan, order and simulated makespan.

The authors' code is loaded as bench/oracle_speed.py loads it (a clone of
github.com/sail-sg/zero-bubble-pipeline-parallelism, read with git show,
stand-ins for torch, numpy and pulp).

usage: python3 bench/authors_grid.py --authors CLONE [--seed 1] [--tsv OUT]
                                     [--public-every 7] [BUILD_DIR]
(--public-every N: the public rows checked are every N-th of each table)
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_speed as osp  # noqa: E402

RTOL = 1e-6
# The public tables' cost sets, x100: the grid leaves them out.
PUBLIC_COSTS = {(100, 100, 100, 0), (100, 120, 70, 5), (200, 150, 120, 30)}
PUBLIC_P = {"zb_heuristic": {4, 8, 16}, "v_schedules": {4, 8, 16}}


def fmt(x100):
    return "%.2f" % (x100 / 100)


def random_costs(rng):
    while True:
        c = (rng.randint(50, 300), rng.randint(50, 300), rng.randint(50, 300), rng.randint(0, 40))
        if c not in PUBLIC_COSTS:
            return c


def make_row(kind, P, M, costs, limit):
    """A row in the oracle tables' string form, which oracle_speed's
    heuristic_call, v_call and kaiten_args read."""
    f, b, w, c = costs
    row = {"kind": kind, "P": str(P), "M": str(M), "F": fmt(f), "B": fmt(b), "W": fmt(w),
           "comm": fmt(c)}
    if kind == "heuristic":
        row["max_mem"] = str(limit)
    else:
        row["setup"] = "zb"
        row["mem_limit_chunks"] = str(limit)
    return row


def spread(rng, lo, hi, n):
    """n integers spread over [lo, hi]: one drawn from each of n equal bins."""
    out = []
    for k in range(n):
        a = lo + (hi - lo) * k / n
        b = lo + (hi - lo) * (k + 1) / n
        out.append(rng.randint(int(a + 0.999999), max(int(a + 0.999999), int(b))))
    return out


def grid(seed):
    rng = random.Random(seed)
    rows = []
    for P in (3, 5, 6, 8, 12):
        limits = (2 * P, 2 * int(1.5 * P + 0.5), 4 * P)
        for M in spread(rng, P, 6 * P, 10):
            for limit in limits:
                rows.append(make_row("heuristic", P, M, random_costs(rng), limit))
    for P in (3, 5, 6, 8):
        ms = [2 * P, 3 * P, 4 * P] * 4 + sorted(rng.sample(range(2, 2 * P), 3))
        for M in ms:
            rows.append(make_row("vzb", P, M, random_costs(rng), 2 * P))
    return rows


def heuristic_order(P, M, order):
    """Per-rank lists of (op, stage, micro-batch) from initial_solution's
    order (node id = type*P*M + stage*M + mb, type 0=F 1=B 2=W; a rank's
    list is its stage's ids sorted by order[id])."""
    ranks = []
    for s in range(P):
        ids = [t * P * M + s * M + j for t in range(3) for j in range(M)]
        ids.sort(key=lambda i: order[i])
        ranks.append([("FBW"[i // (P * M)], s, i % M) for i in ids])
    return ranks


def v_order(local_order):
    """Per-rank lists of (op, stage, micro-batch) from create_schedule's
    ScheduledNode lists (stage = layer_group_idx, rank = stage field)."""
    return [[(str(n.type), n.layer_group_idx, n.microbatch) for n in rank] for rank in local_order]


def order_string(kind, ranks):
    """The oracle tables' `order` column."""
    if kind == "heuristic":
        return "|".join(" ".join(f"{op}{mb}" for op, _, mb in r) for r in ranks)
    return "|".join(" ".join(f"{op}{mb}@{s}" for op, s, mb in r) for r in ranks)


def run_authors(row):
    """(the authors' makespan x100, per-rank order, seconds of the scheduler call)."""
    P, M = int(row["P"]), int(row["M"])
    if row["kind"] == "heuristic":
        call = osp.heuristic_call(row)
        t0 = time.perf_counter()
        best, order, _ = call()
        sec = time.perf_counter() - t0
        return best, heuristic_order(P, M, order), sec
    call = osp.v_call(row)
    t0 = time.perf_counter()
    pg, local_order = call()
    sec = time.perf_counter() - t0
    # create_schedule keeps the try_v_schedule run with the smallest max
    # stage bubble; its makespan is the busy time plus that bubble.
    bubble = min(pg.try_v_schedule(fill_b=fb, fill_f=ff)[2]
                 for fb in (True, False) for ff in (True, False))
    return sum(pg.fbw_cost) * 2 * M + bubble, v_order(local_order), sec


def kaiten_json(kaiten, args):
    t0 = time.perf_counter()
    res = subprocess.run([kaiten, "sim"] + args + ["--format", "json"], check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return json.loads(res.stdout), time.perf_counter() - t0


def time_order(kaiten, row, ranks, tmp):
    """kaiten's simulation of the authors' order, as a text schedule: (makespan,
    peak memory) in kaiten's units (heuristic M_B=2 M_W=1, V chunk units)."""
    P, M = row["P"], row["M"]
    heur = row["kind"] == "heuristic"
    head = f"# kaiten p={P} v={1 if heur else 2} m={M} placement={'loop' if heur else 'v'} name=authors\n"
    path = os.path.join(tmp, "authors.txt")
    with open(path, "w") as f:
        f.write(head)
        for r in ranks:
            f.write(" ".join(f"{s}{'I' if op == 'B' else op}{mb}" for op, s, mb in r) + "\n")
    mem = ["--mem-act", "2", "--mem-wgrad", "1"] if heur else ["--mem-act", "1", "--mem-wgrad", "0.5"]
    out, _ = kaiten_json(kaiten, ["--schedule-file", path, "--tf", row["F"], "--tb", row["B"],
                                  "--tw", row["W"], "--comm", row["comm"], "--per-stage"] + mem)
    return out["makespan"], out["peak_memory"]


def compare(kaiten_ms, authors_ms):
    if abs(kaiten_ms - authors_ms) <= RTOL * max(abs(authors_ms), 1e-12):
        return "equal"
    return "better" if kaiten_ms < authors_ms else "worse"


def check_public(kaiten, tmp, every):
    """Re-runs every `every`-th row of the public tables (V: setup zb only):
    the authors' makespan, their order and kaiten's timing of it must equal
    the table's authors_makespan, order and makespan."""
    bad = n = 0
    for table, kind in (("zb_heuristic", "heuristic"), ("v_schedules", "vzb")):
        rows = osp.read_tsv(os.path.join(osp.ORACLES, table + ".tsv"))
        if kind == "vzb":
            rows = [r for r in rows if r["setup"] == "zb"]
        for r in rows[::every]:
            r = dict(r, kind=kind)
            ms, ranks, _ = run_authors(r)
            timed, _ = time_order(kaiten, r, ranks, tmp)
            ok = ("%.2f" % (ms / 100) == r["authors_makespan"]
                  and order_string(kind, ranks) == r["order"]
                  and abs(timed - float(r["makespan"])) <= 0.005)
            n += 1
            bad += not ok
            print(f"public {table:12s} P={r['P']:>2} M={r['M']:>3} {r['cost_set']}: authors "
                  f"{ms / 100:.2f} (table {r['authors_makespan']}), order "
                  f"{'same' if order_string(kind, ranks) == r['order'] else 'DIFFERENT'}, "
                  f"kaiten timing {timed:.2f} (table {r['makespan']}) {'ok' if ok else 'MISMATCH'}",
                  flush=True)
    print(f"public rows: {n - bad} of {n} reproduced\n", flush=True)
    return bad == 0


COLS = ("kind P M F B W comm mem_limit authors_makespan authors_order_makespan authors_peak "
        "authors_s kaiten_makespan kaiten_peak kaiten_s kaiten_vs thorough_makespan thorough_peak "
        "thorough_s thorough_vs kaiten_command").split()


def main():
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("--authors", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tsv")
    ap.add_argument("--public-every", type=int, default=7)
    ap.add_argument("build", nargs="?", default="build")
    o = ap.parse_args()
    clone, seed, build, tsv, every = o.authors, o.seed, o.build, o.tsv, o.public_every
    kaiten = os.path.abspath(os.path.join(build, "kaiten"))
    helptext = subprocess.run([kaiten, "sim", "--help"], capture_output=True, text=True).stdout
    thorough = "--thorough" in helptext
    if not thorough:
        print("kaiten sim --help does not list --thorough: the thorough columns are left empty\n")
    t_start = time.perf_counter()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        osp.setup_authors(clone, os.path.join(tmp, "authors"))
        if not check_public(kaiten, tmp, every):
            sys.exit("the public rows were not reproduced")
        for i, row in enumerate(grid(seed)):
            P, M = int(row["P"]), int(row["M"])
            limit = row.get("max_mem") or row["mem_limit_chunks"]
            rec = {k: row[k] for k in ("kind", "P", "M", "F", "B", "W", "comm")}
            rec["mem_limit"] = limit
            kargs = osp.kaiten_args("zb_heuristic" if row["kind"] == "heuristic" else "v_schedules", row)
            rec["kaiten_command"] = " ".join(["kaiten", "sim"] + kargs + ["--format", "json"])
            try:
                ms, ranks, sec = run_authors(row)
            except Exception as e:  # the authors' code does not take every input
                rec.update(authors_makespan="error:" + type(e).__name__, authors_s="")
                ms = None
            if ms is not None:
                timed, peak = time_order(kaiten, row, ranks, tmp)
                rec.update(authors_makespan="%.2f" % (ms / 100),
                           authors_order_makespan="%.6f" % timed, authors_peak=peak,
                           authors_s="%.4f" % sec)
            modes = [("kaiten", [])] + ([("thorough", ["--thorough"])] if thorough else [])
            for name, extra in modes:
                res, sec = kaiten_json(kaiten, kargs + extra)
                rec[name + "_makespan"] = "%.6f" % res["makespan"]
                rec[name + "_peak"] = res["peak_memory"]
                rec[name + "_s"] = "%.4f" % sec
                if res["peak_memory"] > float(limit) + 1e-9:
                    rec[name + "_vs"] = "over-limit"
                elif ms is not None:
                    rec[name + "_vs"] = compare(res["makespan"], ms / 100)
                    rec[name + "_rel"] = res["makespan"] / (ms / 100) - 1
            out.append(rec)
            print(f"{i:3d} {row['kind']:9s} P={P:<2} M={M:<3} F={row['F']} B={row['B']} "
                  f"W={row['W']} comm={row['comm']} limit={limit}: authors "
                  f"{rec['authors_makespan']} ({rec.get('authors_s') or '-'} s), kaiten "
                  f"{float(rec['kaiten_makespan']):.4f} {rec.get('kaiten_vs', '-')}"
                  + (f", thorough {float(rec['thorough_makespan']):.4f} {rec.get('thorough_vs', '-')}"
                     if thorough else ""), flush=True)
    elapsed = time.perf_counter() - t_start

    if tsv:
        with open(tsv, "w") as f:
            f.write(f"# python3 bench/authors_grid.py --seed {seed}: kaiten zb-auto/zbv-auto "
                    "against the authors' initial_solution / zbv.py; makespans in the /100 "
                    "units passed to kaiten\n")
            f.write("\t".join(COLS) + "\n")
            for rec in out:
                f.write("\t".join(str(rec.get(c, "")) for c in COLS) + "\n")

    mismatch = [r for r in out if "authors_order_makespan" in r
                and abs(float(r["authors_order_makespan"]) - float(r["authors_makespan"])) > 0.005]
    errors = [r for r in out if str(r["authors_makespan"]).startswith("error")]
    print(f"\n{len(out)} rows (seed {seed}) in {elapsed:.0f} s; authors' code failed on "
          f"{len(errors)}; kaiten's timing of the authors' order differs from their own on "
          f"{len(mismatch)}")
    for r in errors:
        print(f"  authors failed: {r['kind']} P={r['P']} M={r['M']}: {r['authors_makespan']}")
    for mode in ("kaiten", "thorough"):
        if mode == "thorough" and not thorough:
            continue
        for kind in ("heuristic", "vzb", None):
            rs = [r for r in out if (kind is None or r["kind"] == kind) and mode + "_vs" in r]
            if not rs:
                continue
            count = {v: sum(r[mode + "_vs"] == v for r in rs)
                     for v in ("equal", "better", "worse", "over-limit")}
            rel = [r[mode + "_rel"] for r in rs if mode + "_rel" in r]
            print(f"{'default' if mode == 'kaiten' else mode:8s} {kind or 'all':9s} rows {len(rs):3d}: "
                  f"equal {count['equal']}, better {count['better']}, worse {count['worse']}, "
                  f"over the limit {count['over-limit']}; worst {100 * max(rel):+.3f}%, "
                  f"best {100 * min(rel):+.3f}%, mean {100 * sum(rel) / len(rel):+.3f}%")
        for r in out:
            if r.get(mode + "_vs") in ("worse", "over-limit"):
                print(f"  {r[mode + '_vs'].upper()} ({mode}): {r['kind']} P={r['P']} M={r['M']} "
                      f"F={r['F']} B={r['B']} W={r['W']} comm={r['comm']} limit={r['mem_limit']}: "
                      f"kaiten {float(r[mode + '_makespan']):.4f} vs authors {r['authors_makespan']}: "
                      f"{r['kaiten_command']}{' --thorough' if mode == 'thorough' else ''}")
    a_s = sum(float(r["authors_s"]) for r in out if r.get("authors_s"))
    k_s = sum(float(r["kaiten_s"]) for r in out)
    print(f"time: authors' schedulers {a_s:.1f} s, kaiten default calls {k_s:.1f} s"
          + (f", --thorough calls {sum(float(r['thorough_s']) for r in out):.1f} s" if thorough else ""))


if __name__ == "__main__":
    main()
