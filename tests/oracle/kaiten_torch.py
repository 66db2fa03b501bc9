"""The Python package's torch side (python/kaiten/torch) checked with torch.

- profile: the activation bytes of stages whose saved tensors are known
  by hand, times present where torch runs work (the first stage's I is
  empty, as torch skips it), the same numbers on every rank under
  torch.distributed (rank 0 measures);
- partition: the cut of a GPT-2-style model (embedding and LM head as
  blocks) is the exact min-max cut of the measured loads (all cuts tried);
- training: build_schedule's runtimes (zb-auto, auto, zbv-auto with V=2 in
  v placement, zb-auto with V=2 in loop placement; both CSV forms) train
  the model, cut where kaiten.torch.partition says, with the losses of
  torch's ScheduleGPipe on the even split to 1e-5 over 3 SGD steps, on
  gloo, one process per rank, at P=2 and P=4; torch's runtime holds
  exactly kaiten's lowered order. A control run (scale_grads=False) must
  differ.
"""
import itertools
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import torch_model as tm  # noqa: E402

SMALL = dict(layers=6, hidden=32, heads=2, vocab=1000, seq_len=16)
MB, STEPS, LR = 2, 3, 1.0


def _kt():
    import kaiten.torch as kt
    return kt


def check_profile():
    """{check: None | what went wrong}."""
    kt = _kt()
    res = {}
    torch.manual_seed(0)
    lin, head = nn.Linear(16, 32), nn.Sequential(nn.Tanh(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    p = kt.profile([lin, head], x, repeats=2)
    # stage 0 keeps its input (Linear saves it for W) and its output; the
    # last keeps tanh's output (Linear's input too, one storage) and its output
    want = {"mem_act": [8 * 16 * 4 + 8 * 32 * 4, 8 * 32 * 4 + 8 * 4 * 4],
            "out_bytes": [8 * 32 * 4, 0]}
    for k, v in want.items():
        res[f"profile {k} of known stages"] = None if p[k] == v else f"{p[k]} != {v}"
    res["profile M_W: the first stage keeps its graph for W"] = \
        None if p["mem_wgrad"][0] == p["mem_act"][0] else str(p["mem_wgrad"])
    res["profile M_W >= the graph's saved tensors"] = \
        None if p["mem_wgrad"][1] >= 8 * 32 * 4 else str(p["mem_wgrad"])
    ok = p["tb"][0] == 0 and all(t > 0 for k in ("tf", "tw", "tb_full") for t in p[k]) and p["tb"][1] > 0
    res["profile times (the first stage's I empty, as torch skips it)"] = None if ok else str(dict(p))
    grads = [q.grad for q in lin.parameters()]
    res["profile leaves the gradients as they were"] = \
        None if all(g is None for g in grads) else "gradients changed"
    return res


def check_partition():
    kt = _kt()
    blocks = tm.blocks(**SMALL)
    x, y = tm.batch(0, MB, SMALL["seq_len"], SMALL["vocab"])
    res = {}
    for stages in (2, 3, 4):
        part = kt.partition(blocks, stages, x, loss_fn=tm.loss_fn, target=y, repeats=2)
        load = part.profile.load()
        n = len(load)
        best = min(max(sum(load[a:b]) for a, b in zip((0,) + c, c + (n,)))
                   for c in itertools.combinations(range(1, n), stages - 1))
        got = max(part.loads())
        ok = sum(part.counts) == n and abs(got - best) <= 1e-12 * best and \
            abs(part.bottleneck - best) <= 1e-12 * best
        res[f"partition into {stages}: the min-max cut of the measured loads"] = \
            None if ok else f"{part.counts}: {got} vs best {best}"
    ev = kt.even_counts(SMALL["layers"] + 2, 4)
    res["even split: embedding first, head last, blocks spread"] = \
        None if ev == [3, 2, 1, 2] else str(ev)
    return res


# ---- training on gloo ------------------------------------------------------

def _even(p, v):
    return _kt().even_counts(SMALL["layers"] + 2, p * v)


def _ranks(p, v, placement):
    if placement == "v":
        return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]
    return [s % p for s in range(p * v)]


def _train(rank, p, job, cut):
    """Losses of one job on this rank (all ranks return them)."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleGPipe
    kt = _kt()
    m, v, placement = 2 * p, job.get("v", 1), job.get("placement", "loop")
    counts = _even(p, 1) if job["kind"] == "gpipe" else cut[(p, v)]
    ranks = _ranks(p, v, placement)
    blocks = tm.blocks(**SMALL)
    n = len(counts)
    bounds = [sum(counts[:j]) for j in range(n + 1)]
    mine = [s for s in range(n) if ranks[s] == rank]
    mods = [nn.Sequential(*blocks[bounds[s]:bounds[s + 1]]) for s in mine]
    stages = [PipelineStage(mod, s, n, torch.device("cpu")) for mod, s in zip(mods, mine)]
    extra = {}
    if job["kind"] == "gpipe":
        sched = ScheduleGPipe(stages[0], m, loss_fn=tm.loss_fn)
    else:
        costs = kt.Partition(counts, 0, job["block_profile"]) if job.get("measured") else None
        sched = kt.build_schedule(stages, m, tm.loss_fn, kind=job["kind"], costs=costs,
                                  format=job["format"], scale_grads=job.get("scale_grads", True))
        extra["order_matches"] = _order_matches(sched, rank) if job["format"] == "compute_comms" \
            else True
        extra["schedule"] = sched.kaiten_schedule.name
    # SGD: a gradient off by a factor (a missing 1/M) shows in the losses, as
    # it would not under Adam, which normalises the gradient's scale away
    opt = torch.optim.SGD([q for mod in mods for q in mod.parameters()], lr=LR)
    losses = []
    for step in range(STEPS):
        x, y = tm.batch(step, m * MB, SMALL["seq_len"], SMALL["vocab"])
        out = []
        last = n - 1 in mine
        sched.step(*((x,) if 0 in mine else ()), target=y if last else None,
                   losses=out if last else None)
        opt.step()
        opt.zero_grad()
        t = torch.tensor([float(torch.stack(out).detach().mean()) if last else 0.0],
                         dtype=torch.float64)
        dist.all_reduce(t)
        losses.append(float(t))
    return dict(losses=losses, **extra)


def _order_matches(sched, rank):
    """torch's runtime holds kaiten's lowered order for this rank, action for action."""
    want = [c for c in sched.kaiten_schedule.to_csv("compute_comms").splitlines()[rank].split(",") if c]
    got = [str(a) for a in sched.pipeline_order_with_comms[rank]]
    return got == want


def _worker(rank, p, jobs, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=p)
    kt = _kt()
    blocks = tm.blocks(**SMALL)
    x, y = tm.batch(0, MB, SMALL["seq_len"], SMALL["vocab"])
    # rank 0 measures, every rank gets its numbers: the cuts agree
    cut, prof = {}, None
    for v in (1, 2):
        part = kt.partition(blocks, p * v, x, loss_fn=tm.loss_fn, target=y, repeats=2)
        cut[(p, v)] = part.counts
        prof = prof or part.profile
    seen = [None] * p
    dist.all_gather_object(seen, (cut[(p, 1)], cut[(p, 2)], prof["tf"]))
    results = {"_same_cut_on_every_rank": all(s == seen[0] for s in seen)}
    for job in jobs:
        job = dict(job, block_profile=prof)
        try:
            results[job["name"]] = _train(rank, p, job, cut)
        except Exception as e:  # recorded; every rank moves on together
            results[job["name"]] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        flags = [None] * p
        dist.all_gather_object(flags, results[job["name"]].get("order_matches", True))
        results[job["name"]]["order_matches"] = all(flags)
        dist.barrier()
    if rank == 0:
        results["_cut"] = ", ".join(f"V={v} {','.join(map(str, c))}" for (_, v), c in cut.items())
        with open(out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


JOBS = [{"name": "ScheduleGPipe (even split)", "kind": "gpipe"},
        {"name": "zb-auto compute_comms", "kind": "zb-auto", "format": "compute_comms", "measured": 1},
        {"name": "zb-auto compute_only", "kind": "zb-auto", "format": "compute_only", "measured": 1},
        {"name": "auto compute_comms", "kind": "auto", "format": "compute_comms", "measured": 1},
        {"name": "1f1b compute_comms", "kind": "1f1b", "format": "compute_comms", "measured": 1},
        {"name": "zb-auto V=2 loop compute_comms", "kind": "zb-auto", "format": "compute_comms",
         "v": 2, "measured": 1},
        {"name": "zbv-auto V=2 v compute_comms", "kind": "zbv-auto", "format": "compute_comms",
         "v": 2, "placement": "v", "measured": 1},
        {"name": "control: zb-auto without scale_grads", "kind": "zb-auto",
         "format": "compute_comms", "measured": 1, "scale_grads": False}]


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_training(tmp):
    """[{p, job, equal, order_matches, ...}] against ScheduleGPipe's losses."""
    rows = []
    for p in (2, 4):
        out = os.path.join(tmp, f"kaiten_torch_p{p}.json")
        mp.start_processes(_worker, args=(p, JOBS, _port(), out), nprocs=p, join=True,
                           start_method="spawn")
        with open(out) as f:
            res = json.load(f)
        ref = res[JOBS[0]["name"]].get("losses")
        for job in JOBS[1:]:
            r = res[job["name"]]
            got = r.get("losses")
            equal = got is not None and ref is not None and all(
                abs(a - b) <= 1e-5 * max(abs(b), 1e-12) for a, b in zip(got, ref))
            rows.append({"p": p, "job": job["name"], "schedule": r.get("schedule"),
                         "losses": got, "reference": ref, "error": r.get("error"), "equal": equal,
                         "order_matches": r.get("order_matches"), "cut": res["_cut"],
                         "same_cut": res["_same_cut_on_every_rank"]})
    return rows
