"""kaiten's GPT step against torch's on 2 cores: the same model, the same
initial weights, the same batches and AdamW, paired run by run.

Needs a build and the oracle venv (make build; scripts/torch-oracle.sh install):

    scripts/torch-oracle.sh python bench/torch_single.py [--models L8,L12 --pairs 5 --json out.json]

Models (byte vocabulary, whole batch per step): L8 = --layers 8 --hidden
256 --heads 8 --seq-len 128, batch 32; L12 = --layers 12 --hidden 384
--heads 6 --seq-len 256, batch 16 (4096 tokens a step each).

Settings, each a fresh process that trains --steps steps (the first
excluded: its median step time is the run's time):
  kaiten: single = one process, one rank (P=1), the whole batch as one
          micro-batch, 2 threads per rank (the kernels alone: threads
          inside the step); pipeline = P=2, 1 thread per rank, M=8, zb-h1
          and 1f1b; dp = 2 data-parallel replicas of 1 thread
  torch:  single = one process, torch.set_num_threads(2), the whole batch
          (eager, fused AdamW); ddp = 2 processes of 1 thread (gloo),
          half the batch each
Every setting runs --screen times; the fastest of each system ("best")
then runs against the other's best, and kaiten single against torch
single, for --pairs pairs each, the order swapped every pair. A ratio is
torch's step time over kaiten's in one pair; the result is the median of
the pairs' ratios.

Quiet machine: with --nice -20 (root) this session, both systems' runs
included, takes the cores ahead of the machine's other sessions (the
autogroup's nice, /proc/self/autogroup); before every run the script also waits (up to --max-wait s)
until the other processes on the machine took less than --quiet-cores
of CPU over 2 s, and every run records what the others took while it ran
(/proc/stat busy time less the run's own) and the load average. Pairs in
which either run saw others above --quiet-cores are reported apart.
Losses: kaiten's and torch's first-step loss must agree to 1e-4 (the same
weights and batch).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

MODELS = {  # name -> layers, hidden, heads, seq_len, batch
    "L4": (4, 64, 4, 64, 32),
    "L8": (8, 256, 8, 128, 32),
    "L12": (12, 384, 6, 256, 16),
}
KAITEN = ["single", "pipeline-zb", "pipeline-1f1b", "dp"]
TORCH = ["single", "ddp"]


# ---- the machine -----------------------------------------------------------------


def cpu_busy():
    """Busy CPU seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_quiet(a):
    """Waits until others take < quiet_cores over 2 s; returns what they took.
    With --nice no wait: the others run whenever this session idles."""
    if a.nice is not None:
        return 0.0
    t_end = time.time() + a.max_wait
    while True:
        b0, t0 = cpu_busy(), time.perf_counter()
        time.sleep(2.0)
        others = (cpu_busy() - b0) / (time.perf_counter() - t0)
        if others < a.quiet_cores or time.time() > t_end:
            return others


def set_priority(nice):
    """The CPU share of this session against the machine's other sessions:
    Linux schedules sessions (autogroups) fairly against each other, so a
    process's own nice value gives it nothing over another session's
    processes; the autogroup's nice does (root). Returns the old value."""
    path = "/proc/self/autogroup"
    try:
        with open(path) as f:
            old = int(f.read().split("nice")[1])
        with open(path, "w") as f:
            f.write(str(nice))
        return old
    except (OSError, ValueError, IndexError) as e:
        sys.exit(f"torch_single: --nice {nice}: cannot set {path}: {e}")


def measured(cmd, env=None):
    """Runs cmd; returns (stdout, seconds, CPU the other processes took, in cores)."""
    b0, c0, t0 = cpu_busy(), children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    others = max(0.0, (cpu_busy() - b0) - (children_cpu() - c0)) / wall
    if p.returncode:
        sys.exit(f"torch_single: {' '.join(cmd[:4])} ... failed:\n{p.stderr[-2000:]}")
    return p.stdout, wall, others


# ---- kaiten --------------------------------------------------------------------------


def kaiten_cmd(a, model, setting, data, init=None, run_dir=None):
    L, C, NH, T, B = MODELS[model]
    cmd = [a.kaiten, "train", "--model", "gpt", "--layers", str(L), "--hidden", str(C), "--heads",
           str(NH), "--seq-len", str(T), "--steps", str(a.steps), "--data", data, "--val-every", "0",
           "--format", "json", "--no-live", "--gemm", a.gemm]
    if setting == "single":
        cmd += ["-p", "1", "-m", "1", "-b", str(B), "--threads-per-rank", "2"]
    elif setting.startswith("pipeline"):
        cmd += ["-p", "2", "-m", "8", "-b", str(B // 8), "--threads-per-rank", "1", "--schedule",
                "zb-h1" if setting.endswith("zb") else "1f1b"]
    else:  # dp: 2 replicas, the batch split between them
        cmd += ["-p", "1", "-m", "1", "-b", str(B // 2), "-d", "2", "--threads-per-rank", "1"]
    if init:
        cmd += ["--save-init", init, "--run-dir", run_dir]
    return cmd


def run_kaiten(a, model, setting, data):
    out, wall, others = measured(kaiten_cmd(a, model, setting, data))
    d = json.loads(out.strip().splitlines()[-1])
    return {"seconds": d["median_step_seconds"], "losses": d["losses"], "gemm": d.get("gemm"),
            "others": others, "load": os.getloadavg()[0]}


# ---- torch (a fresh process per run: this script with --torch-run) ------------------


def torch_run(spec):
    """The torch side of one run; prints its JSON."""
    import math
    import numpy as np
    import torch
    import torch.nn as nn
    import torch_gpt as tg

    ddp = spec["setting"] == "ddp"
    rank, world = 0, 1
    if ddp:
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), 2
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1 if ddp else 2)
    ck = tg.read_checkpoint(spec["init"])
    cfg = spec["config"]
    model, opt_cfg = cfg["model"], cfg["optimizer"]
    units = [tg.unit_module(model, u, ck["units"][u]) for u in range(model["layers"] + 2)]
    net = nn.Sequential(*units)
    params = list(net.parameters())
    kw = {"fused": True} if "fused" in torch.optim.AdamW.__init__.__code__.co_varnames else {}
    opt = torch.optim.AdamW(params, lr=opt_cfg["lr"], betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0, **kw)
    with open(spec["data"], "rb") as f:
        text = f.read()
    B = spec["batch"]
    losses, seconds = [], []
    for step in range(spec["steps"]):
        tok, tgt = tg.train_batch(text, model["seed"], step, 1, B, model["seq_len"])
        if ddp:
            tok, tgt = tok[rank * B // 2:(rank + 1) * B // 2], tgt[rank * B // 2:(rank + 1) * B // 2]
            dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = tg.cross_entropy(net(tok), tgt)
        loss.backward()
        if ddp:  # the gradients' mean over the two halves, one flat all-reduce
            flat = torch.cat([q.grad.reshape(-1) for q in params]).div_(world)
            dist.all_reduce(flat)
            pos = 0
            for q in params:
                q.grad.copy_(flat[pos:pos + q.numel()].view_as(q))
                pos += q.numel()
        norm = math.sqrt(float(sum(q.grad.double().pow(2).sum() for q in params)))
        clip = opt_cfg["grad_clip"]
        if clip > 0 and norm > clip:
            for q in params:
                q.grad.mul_(clip / norm)
        for g in opt.param_groups:
            g["lr"] = tg.kaiten_lr(opt_cfg, step)
        opt.step()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(loss))
    if rank == 0:
        print(json.dumps({"seconds": float(np.median(seconds[1:])), "losses": losses,
                          "torch": torch.__version__}))
    if ddp:
        dist.destroy_process_group()


def run_torch(a, model, setting, spec_path):
    base = [sys.executable, os.path.abspath(__file__), "--torch-run", spec_path, "--setting",
            setting]
    if setting != "ddp":
        out, wall, others = measured(base)
    else:  # two processes; rank 0 prints
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        launcher = ("import os,subprocess,sys\n"
                    "env=dict(os.environ,MASTER_ADDR='127.0.0.1',MASTER_PORT='%d',WORLD_SIZE='2')\n"
                    "ps=[subprocess.Popen(sys.argv[1:],env=dict(env,RANK=str(r)),"
                    "stdout=None if r==0 else subprocess.DEVNULL) for r in (0,1)]\n"
                    "sys.exit(max(p.wait() for p in ps))\n" % port)
        out, wall, others = measured([sys.executable, "-c", launcher] + base)
    d = json.loads(out.strip().splitlines()[-1])
    d.update(others=others, load=os.getloadavg()[0])
    return d


# ---- the comparison -----------------------------------------------------------------


def prepare(a, model, tmp, data):
    """kaiten's initial weights and run config (one short run), torch's spec."""
    init, run_dir = os.path.join(tmp, model + ".ckpt"), os.path.join(tmp, model + ".run")
    cmd = kaiten_cmd(a, model, "single", data, init, run_dir)
    cmd[cmd.index("--steps") + 1] = str(a.steps)
    subprocess.run(cmd, check=True, capture_output=True)
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    spec = {"init": init, "config": config, "data": data, "steps": a.steps,
            "batch": MODELS[model][4]}
    path = os.path.join(tmp, model + ".spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def one(a, system, model, setting, spec, data):
    wait_quiet(a)
    r = run_kaiten(a, model, setting, data) if system == "kaiten" else \
        run_torch(a, model, setting, spec)
    print(f"  {model:4s} {system:6s} {setting:14s} {1e3 * r['seconds']:9.1f} ms/step  "
          f"others {r['others']:.2f} cores  load {r['load']:.2f}  loss1 {r['losses'][0]:.6f}"
          + (f"  gemm {r['gemm']}" if r.get("gemm") else ""), flush=True)
    return r


def pairs(a, model, k_setting, t_setting, spec, data):
    out = []
    for i in range(a.pairs):
        order = [("kaiten", k_setting), ("torch", t_setting)]
        if i % 2:
            order.reverse()
        got = {s: one(a, s, model, st, spec, data) for s, st in order}
        out.append({"ratio": got["torch"]["seconds"] / got["kaiten"]["seconds"],
                    "kaiten": got["kaiten"]["seconds"], "torch": got["torch"]["seconds"],
                    "others": max(got["kaiten"]["others"], got["torch"]["others"]),
                    "load": max(got["kaiten"]["load"], got["torch"]["load"]),
                    "loss1": [got["kaiten"]["losses"][0], got["torch"]["losses"][0]]})
    return out


def summary(name, ps, quiet):
    r = [p["ratio"] for p in ps]
    calm = [p["ratio"] for p in ps if p["others"] < quiet]
    return {"name": name, "pairs": ps, "median_ratio": statistics.median(r),
            "min": min(r), "max": max(r), "quiet_pairs": len(calm),
            "quiet_median_ratio": statistics.median(calm) if calm else None}


def compare(a, model, tmp, data):
    spec = prepare(a, model, tmp, data)
    print(f"{model}: screening ({a.screen} run(s) per setting)", flush=True)
    screen = {}
    for _ in range(a.screen):
        for st in KAITEN:
            screen.setdefault(("kaiten", st), []).append(one(a, "kaiten", model, st, spec, data))
        for st in TORCH:
            screen.setdefault(("torch", st), []).append(one(a, "torch", model, st, spec, data))
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in screen.items()}
    best_k = min(KAITEN, key=lambda s: med[("kaiten", s)])
    best_t = min(TORCH, key=lambda s: med[("torch", s)])
    l1 = [screen[("kaiten", "single")][0]["losses"][0], screen[("torch", "single")][0]["losses"][0]]
    res = {"model": model, "shape": MODELS[model], "screen": {f"{k[0]} {k[1]}": v for k, v in med.items()},
           "best_kaiten": best_k, "best_torch": best_t, "first_loss": l1,
           "first_loss_rel_diff": abs(l1[0] - l1[1]) / abs(l1[1])}
    print(f"{model}: kaiten single against torch single, {a.pairs} pairs", flush=True)
    res["single"] = summary("single", pairs(a, model, "single", "single", spec, data), a.quiet_cores)
    print(f"{model}: kaiten's best ({best_k}) against torch's best ({best_t})", flush=True)
    res["best"] = summary("best", pairs(a, model, best_k, best_t, spec, data), a.quiet_cores)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaiten", default=os.path.join(REPO, "build", "kaiten"))
    ap.add_argument("--models", default="L8,L12")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--screen", type=int, default=1)
    ap.add_argument("--gemm", default="auto", help="kaiten train --gemm")
    ap.add_argument("--quiet-cores", type=float, default=0.15)
    ap.add_argument("--max-wait", type=float, default=300)
    ap.add_argument("--nice", type=int, help="this session's CPU priority against the machine's "
                    "other sessions while it runs (-20: ahead of everything else; root)")
    ap.add_argument("--data", help="training text (default: docs/*.md and README.md)")
    ap.add_argument("--json", help="write every run and the summary to this file")
    ap.add_argument("--torch-run", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    if a.torch_run:
        with open(a.torch_run) as f:
            spec = json.load(f)
        spec["setting"] = a.setting
        return torch_run(spec)
    old_nice = set_priority(a.nice) if a.nice is not None else None
    try:
        run_all(a)
    finally:
        if old_nice is not None:
            set_priority(old_nice)


def run_all(a):
    import torch
    import torch_gpt as tg
    report = {"args": vars(a), "torch": torch.__version__, "cores": os.cpu_count(),
              "start": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "load_before": os.getloadavg(), "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = a.data or tg.default_data(tmp)
        for model in a.models.split(","):
            report["models"].append(compare(a, model, tmp, data))
    report["end"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    report["load_after"] = os.getloadavg()
    print(f"\ntorch {torch.__version__}, {report['start']} - {report['end']}, "
          f"load {report['load_before'][0]:.2f} -> {report['load_after'][0]:.2f}")
    print(f"{'model':5s} {'comparison':34s} {'torch/kaiten':>12s} {'min-max':>13s} {'quiet':>8s}")
    for m in report["models"]:
        for key, label in (("single", "single vs single (2 threads)"),
                           ("best", f"{m['best_kaiten']} vs {m['best_torch']}")):
            s = m[key]
            q = f"{s['quiet_median_ratio']:.3f}" if s["quiet_median_ratio"] else "-"
            print(f"{m['model']:5s} {label:34s} {s['median_ratio']:12.3f} "
                  f"{s['min']:6.3f}-{s['max']:.3f} {q:>5s} ({s['quiet_pairs']}/{len(s['pairs'])})")
        print(f"      first-step loss: kaiten {m['first_loss'][0]:.6f}, torch {m['first_loss'][1]:.6f}"
              f" (rel diff {m['first_loss_rel_diff']:.1e})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
