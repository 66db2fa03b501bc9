"""kaiten.torch against PyTorch's own schedules, on the same model.

Needs the oracle venv and a build (make build; scripts/torch-oracle.sh install):

    scripts/torch-oracle.sh python bench/torch_kaiten.py [--ps 2,4 --pairs 6 --json out.json]

A GPT-2-style model (bench/torch_model.py) whose LM head over a 50257-token
vocabulary is its heaviest block trains on CPU with gloo, one process per
rank and one thread each, with the same weights, batches, global batch and
AdamW in every run:

- torch: each built-in schedule (GPipe, 1F1B, Interleaved1F1B,
  InterleavedZeroBubble, ZBVZeroBubble, DualPipeV) on PyTorch's even split
  (the transformer blocks spread evenly over the stages, the embedding on
  the first, the head on the last);
- kaiten: kaiten.torch.partition measures every block and cuts the model
  where F+I+W balance, then kaiten.torch.build_schedule(kind="auto") loads
  the fastest kaiten order for the measured stage costs (zb-auto or
  another, chosen in kaiten's simulator) into _PipelineScheduleRuntime.

One set of processes (one per rank) per P runs everything: every
configuration in turn for --screen-rounds rounds, then torch's best of
those against kaiten back to back for --pairs rounds (the order swapped
each round). The table gives each configuration's median tokens/s over
its runs, its losses (every run's equal to the first configuration's to
--tol, or flagged) and each rank's peak resident memory (VmHWM, reset
before every run; in brackets what the run added to the process); the
speedup is the median of the pairs' ratios. Every run records the load
average it started under.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("KAITEN_LIB_DIR", os.path.join(REPO, "build"))
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import torch_model as tm  # noqa: E402

TORCH = {  # name -> (stages per rank, placement)
    "GPipe": (1, "loop"), "1F1B": (1, "loop"), "Interleaved1F1B": (2, "loop"),
    "InterleavedZeroBubble": (2, "loop"), "ZBVZeroBubble": (2, "v"), "DualPipeV": (2, "v"),
}


def stage_ranks(p, v, placement):
    """rank of each of the P*V stages."""
    if placement == "v":
        return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]
    return [s % p for s in range(p * v)]


def rss_mb(field="VmHWM"):
    """The process's peak (VmHWM) or current (VmRSS) resident memory, MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _schedule(cfg, stages, m):
    from torch.distributed.pipelining import schedules as S
    if cfg["kind"] == "kaiten":
        import kaiten.torch as kt
        sched = kt.build_schedule(stages, m, tm.loss_fn, kind=cfg["kaiten_kind"],
                                  costs=cfg["costs"], format=cfg["format"])
        return sched, sched.kaiten_schedule.name
    cls = getattr(S, "Schedule" + cfg["name"])
    v = TORCH[cfg["name"]][0]
    return cls(stages[0] if v == 1 else stages, m, loss_fn=tm.loss_fn), cfg["name"]


def _cpu_busy():
    """Seconds of CPU the whole machine has spent busy since boot (every
    core, every process: /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def _release_memory():
    """Frees what the last run held and restarts the peak RSS count
    (VmHWM) from what the process holds now."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _train(rank, a, cfg):
    """One run of cfg on this rank: (schedule label, losses, seconds)."""
    from torch.distributed.pipelining import PipelineStage
    counts, ranks = cfg["counts"], cfg["stage_ranks"]
    n = len(counts)
    blocks = tm.blocks(a["layers"], a["hidden"], a["heads"], a["vocab"], a["seq_len"])
    bounds = [sum(counts[:j]) for j in range(n + 1)]
    mine = [s for s in range(n) if ranks[s] == rank]
    mods = {s: torch.nn.Sequential(*blocks[bounds[s]:bounds[s + 1]]) for s in mine}
    del blocks
    stages = [PipelineStage(mods[s], s, n, torch.device("cpu")) for s in mine]
    m, b, T = a["microbatches"], a["mb_size"], a["seq_len"]
    sched, label = _schedule(cfg, stages, m)
    params = [q for mod in mods.values() for q in mod.parameters()]
    opt = _optimizer(a, params)
    first, last = 0 in mine, n - 1 in mine
    losses, t0 = [], None
    for step in range(a["warmup"] + a["steps"]):
        if step == a["warmup"]:
            dist.barrier()
            t0, c0, b0 = time.perf_counter(), time.process_time(), _cpu_busy()
        x, y = tm.batch(step, m * b, T, a["vocab"])
        mb_losses = []
        sched.step(*((x,) if first else ()), target=y if last else None,
                   losses=mb_losses if last else None)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = torch.tensor([float(torch.stack(mb_losses).detach().mean()) if last else 0.0],
                             dtype=torch.float64)
        dist.all_reduce(value)
        losses.append(float(value))
    cpu = (time.process_time() - c0) / a["steps"]  # this rank's own work per step
    busy = _cpu_busy() - b0
    dist.barrier()
    return label, losses, time.perf_counter() - t0, cpu, busy


def _optimizer(a, params):
    return torch.optim.AdamW(params, lr=a["lr"], weight_decay=0.0)


def _kaiten_config(a, args):
    """kaiten's run: rank 0 measures every block and cuts (kaiten.torch.partition
    broadcasts the cut), then picks the kind in kaiten's simulator."""
    import kaiten.torch as kt
    blocks = tm.blocks(a["layers"], a["hidden"], a["heads"], a["vocab"], a["seq_len"])
    x, y = tm.batch(0, a["mb_size"], a["seq_len"], a["vocab"])
    t0 = time.perf_counter()
    part = kt.partition(blocks, a["p"], x, loss_fn=tm.loss_fn, target=y,
                        repeats=args["profile_repeats"], optimizer=lambda ps: _optimizer(a, ps),
                        n_microbatches=a["microbatches"])
    seconds = time.perf_counter() - t0
    kinds = args["kaiten_kinds"].split(",") if args["kaiten_kinds"] else None
    cores = len(os.sched_getaffinity(0))  # the ranks share this machine's cores
    sched, seen = kt.choose(a["p"], 1, "loop", a["microbatches"], part, kinds=kinds, cores=cores)
    return {"kind": "kaiten", "name": "kaiten", "kaiten_kind": sched.name, "costs": part,
            "format": args["format"], "counts": part.counts,
            "stage_ranks": stage_ranks(a["p"], 1, "loop"), "simulated": seen,
            "partition_seconds": seconds, "block_load": part.profile.load(),
            "block_optimizer": part.profile["optimizer"], "cores": cores}


def _wait_quiet(a):
    """Waits (up to a["max_wait"] seconds) until the other tenants use less
    than a["quiet_cores"] of the machine: every rank sleeps through the same
    3 s, rank 0 reads what the machine spent busy meanwhile. Returns the
    seconds waited."""
    if not a["quiet_cores"]:
        return 0.0
    t0 = time.perf_counter()
    while True:
        dist.barrier()
        b0, w0 = _cpu_busy(), time.perf_counter()
        time.sleep(3)
        others = [(_cpu_busy() - b0) / (time.perf_counter() - w0)]
        dist.broadcast_object_list(others, group_src=0)
        waited = time.perf_counter() - t0
        if others[0] < a["quiet_cores"] or waited > a["max_wait"]:
            return waited


def _measured(rank, a, c):
    """One run of c, timed, with each rank's peak memory and the load average."""
    waited = _wait_quiet(a)
    _release_memory()
    base, load = rss_mb("VmRSS"), os.getloadavg()[0]
    dist.barrier()
    try:
        label, losses, seconds, cpu, busy = _train(rank, a, c)
        r = {"label": label, "losses": losses, "seconds": seconds, "cpu": cpu, "busy": busy,
             "tokens_per_s": a["steps"] * a["microbatches"] * a["mb_size"] * a["seq_len"] / seconds}
    except Exception as e:  # a schedule torch refuses at these sizes
        r = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"}
    rss = [None] * a["p"]
    dist.all_gather_object(rss, (rss_mb(), rss_mb() - base, r.get("cpu")))
    r["peak_rss_mb"], r["run_rss_mb"] = [x[0] for x in rss], [x[1] for x in rss]
    r["cpu_per_step"] = [x[2] for x in rss]
    r["load_before"] = load
    r["waited"] = waited
    if "error" not in r:
        # the other tenants' share of the machine during the run, in cores:
        # all the CPU it spent busy less what the ranks themselves used
        ours = sum(r["cpu_per_step"]) * a["steps"]
        r["other_cores"] = max(0.0, r["busy"] - ours) / r["seconds"]
    if rank == 0:
        print(f"  {c['name']:22s} " +
              (f"{r['tokens_per_s']:8.1f} tok/s   others {r['other_cores']:.2f} cores"
               if "error" not in r else r["error"]) +
              f"   (load average {load:.1f})", flush=True)
    return r


def _best_torch(results, n_torch):
    """Index of the torch configuration with the highest median tokens/s."""
    def median(rs):
        ok = [r["tokens_per_s"] for r in rs if "error" not in r]
        return statistics.median(ok) if ok else -1
    return max(range(n_torch), key=lambda i: median(results[i]))


def _worker(rank, a, args, cfgs, port, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a["p"])
    kcfg = _kaiten_config(a, args)
    cfgs = cfgs + [kcfg]
    if rank == 0:
        print(f"P={a['p']}: kaiten cut {kcfg['counts']} (measured in "
              f"{kcfg['partition_seconds']:.1f} s), chose {kcfg['kaiten_kind']}: simulated "
              f"{kcfg['simulated']}", flush=True)
    results = [[] for _ in cfgs]
    _train(rank, a, cfgs[-1])  # the process's first run pays one-time costs: not counted
    # screen: every configuration in turn, round after round
    for rnd in range(args["screen_rounds"]):
        for i, c in enumerate(cfgs):
            results[i].append(_measured(rank, a, c))
    # pairs: torch's best against kaiten, back to back, the order swapped each round
    box = [_best_torch(results, len(cfgs) - 1) if rank == 0 else None]
    dist.broadcast_object_list(box, group_src=0)
    best, k = box[0], len(cfgs) - 1
    pairs = []
    for rnd in range(args["pairs"]):
        order = (best, k) if rnd % 2 == 0 else (k, best)
        got = {i: _measured(rank, a, cfgs[i]) for i in order}
        for i in order:
            results[i].append(got[i])
        if "error" not in got[best] and "error" not in got[k]:
            pairs.append({"ratio": got[k]["tokens_per_s"] / got[best]["tokens_per_s"],
                          "others": max(got[best]["other_cores"], got[k]["other_cores"])})
    if rank == 0:
        kcfg = {key: v for key, v in kcfg.items() if key != "costs"}
        with open(out + ".part", "w") as f:
            json.dump({"cfgs": cfgs[:-1] + [kcfg], "results": results, "best": best,
                       "pairs": pairs}, f)
        os.rename(out + ".part", out)
    dist.barrier()
    dist.destroy_process_group()


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_p(a, args, cfgs):
    """Every configuration of one P on one set of processes (a new port and
    start when the rendezvous port was taken meanwhile). Rank 0 writes the
    results before the process group is torn down: a rank that dies in
    gloo's teardown after that loses nothing (it is said on stderr)."""
    for attempt in range(3):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "result.json")
            try:
                mp.start_processes(_worker, args=(a, args, cfgs, _port(), out), nprocs=a["p"],
                                   join=True, start_method="spawn")
            except mp.ProcessRaisedException as e:
                if "EADDRINUSE" in str(e) and attempt < 2:
                    continue
                raise
            except mp.ProcessExitedException as e:
                if not os.path.exists(out):
                    raise
                print(f"torch_kaiten: after the results were written: {e}", file=sys.stderr)
            with open(out) as f:
                return json.load(f)


def torch_configs(a, names):
    """torch's schedules on PyTorch's even split."""
    import kaiten.torch as kt
    out = []
    for name in names:
        v, placement = TORCH[name]
        out.append({"kind": "torch", "name": name,
                    "counts": kt.even_counts(a["layers"] + 2, a["p"] * v),
                    "stage_ranks": stage_ranks(a["p"], v, placement)})
    return out


def summarise(p, cfgs, results, tol, cores):
    """The table rows of one P, and whether kaiten's losses equal torch's."""
    rows = []
    ref = None
    for c, rs in zip(cfgs, results):
        ok = [r for r in rs if "error" not in r]
        if not ok:
            rows.append({"config": c["name"], "error": rs[0]["error"] if rs else "not run"})
            continue
        tps = [r["tokens_per_s"] for r in ok]
        row = {"config": c["name"], "schedule": ok[0]["label"], "counts": c["counts"],
               "tokens_per_s": statistics.median(tps), "runs": tps, "losses": ok[0]["losses"],
               "all_losses": [r["losses"] for r in ok],
               "cpu_per_step": [statistics.median(r["cpu_per_step"][k] for r in ok)
                                for k in range(p)],
               "load": statistics.median(r["load_before"] for r in ok),
               "load_range": [min(r["load_before"] for r in ok), max(r["load_before"] for r in ok)],
               "other_cores": statistics.median(r["other_cores"] for r in ok),
               "other_cores_max": max(r["other_cores"] for r in ok),
               "peak_rss_mb": [max(r["peak_rss_mb"][k] for r in ok) for k in range(p)],
               "run_rss_mb": [max(r["run_rss_mb"][k] for r in ok) for k in range(p)]}
        # what the ranks' own work allows: no step is shorter than the
        # busiest rank's CPU time, nor than all ranks' CPU time over the cores
        cpu = row["cpu_per_step"]
        row["cpu_bound_s"] = max(max(cpu), sum(cpu) / cores)
        rows.append(row)
        ref = ref or row["losses"]
    for row in rows:
        if "losses" in row:
            row["max_loss_diff"] = max(abs(x - y) for run in row["all_losses"]
                                       for x, y in zip(run, ref))
            row["losses_equal"] = row["max_loss_diff"] <= tol
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ps", default="2,4")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--mb-size", type=int, default=1)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--screen-rounds", type=int, default=2,
                    help="rounds of every configuration, to find torch's best")
    ap.add_argument("--pairs", type=int, default=6,
                    help="rounds of torch's best against kaiten, back to back")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--torch", default=",".join(TORCH))
    ap.add_argument("--kaiten-kinds", default="", help="kinds kaiten may choose from (default: all)")
    ap.add_argument("--format", default="compute_comms")
    ap.add_argument("--profile-repeats", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--quiet-cores", type=float, default=0.0,
                    help="before each run, wait until other processes use less than this many "
                         "cores (0: do not wait)")
    ap.add_argument("--calm-cores", type=float, default=0.25,
                    help="a pair counts as calm when other processes used less than this many "
                         "cores in both its runs")
    ap.add_argument("--max-wait", type=float, default=600, help="the longest wait for quiet, s")
    ap.add_argument("--json")
    args = ap.parse_args()
    report = {"args": vars(args), "load_before": os.getloadavg(), "ps": {}}
    for p in map(int, args.ps.split(",")):
        a = {"p": p, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
             "vocab": args.vocab, "seq_len": args.seq_len, "mb_size": args.mb_size,
             "microbatches": args.microbatches, "steps": args.steps, "warmup": args.warmup,
             "lr": args.lr, "quiet_cores": args.quiet_cores, "max_wait": args.max_wait}
        done = run_p(a, vars(args), torch_configs(a, args.torch.split(",")))
        cfgs, results = done["cfgs"], done["results"]
        k = cfgs[-1]
        rows = summarise(p, cfgs, results, args.tol, len(os.sched_getaffinity(0)))
        best = rows[done["best"]]
        kai = rows[-1]
        pair = [x["ratio"] for x in done["pairs"]]
        calm = [x["ratio"] for x in done["pairs"] if x["others"] < args.calm_cores]
        report["ps"][p] = {"rows": rows, "best_torch": best["config"], "cut": k["counts"],
                           "kaiten_kind": k["kaiten_kind"], "simulated": k["simulated"],
                           "block_load": k["block_load"],
                           "speedup": kai["tokens_per_s"] / best["tokens_per_s"],
                           "speedup_pairs": pair,
                           "speedup_pairs_median": statistics.median(pair) if pair else None,
                           "pairs": done["pairs"], "calm_pairs": calm,
                           "speedup_calm_pairs_median": statistics.median(calm) if calm else None}
        print_table(p, report["ps"][p])
    report["load_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


def print_table(p, res):
    print(f"\nP={p}: {'config':22s} {'schedule':22s} {'cut':14s} {'tokens/s':>9s}  "
          f"{'others':>6s}  {'loss diff':>9s}  {'CPU s/step per rank':24s} {'bound s':>7s}  "
          f"peak RSS per rank, MB (of it the run's own)")
    for r in res["rows"]:
        if "error" in r:
            print(f"      {r['config']:22s} {r['error']}")
            continue
        print(f"      {r['config']:22s} {r['schedule']:22s} {','.join(map(str, r['counts'])):14s} "
              f"{r['tokens_per_s']:9.1f}  {r['other_cores']:6.2f}  {r['max_loss_diff']:9.2e}  "
              f"{' '.join(f'{x:.2f}' for x in r['cpu_per_step']):24s} {r['cpu_bound_s']:7.2f}  "
              f"{', '.join(f'{x:.0f} ({y:.0f})' for x, y in zip(r['peak_rss_mb'], r['run_rss_mb']))}")
    pm = res["speedup_pairs_median"]
    print(f"  kaiten / best torch ({res['best_torch']}): {res['speedup']:.3f} (medians of every "
          f"run); back-to-back pairs: median {pm if pm is None else round(pm, 3)} of "
          f"{', '.join(f'{x:.3f}' for x in res['speedup_pairs'])}", flush=True)
    cm = res["speedup_calm_pairs_median"]
    print(f"  calm pairs (others < the threshold in both runs): {len(res['calm_pairs'])}, median "
          f"{cm if cm is None else round(cm, 3)}\n", flush=True)


if __name__ == "__main__":
    main()
