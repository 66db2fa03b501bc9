"""kaiten's GPT and the same model in torch.distributed.pipelining, side by side.

Needs the oracle venv (scripts/torch-oracle.sh install); run it as

    scripts/torch-oracle.sh python bench/torch_gpt.py [--schedule zb-h1 -p 2 -m 4 --steps 30]

1. kaiten writes the schedule (--format torch-csv) and trains its GPT on it
   (threads), saving its starting weights with --save-init and its layout
   and optimizer in the run directory's config.json;
2. torch builds the same architecture (GPT-2 blocks, LayerNorm eps 1e-5,
   tanh GELU, causal attention, untied head), loads those weights unit by
   unit from kaiten's checkpoint file, cuts it at kaiten's partition, and
   trains with _PipelineScheduleRuntime on the same schedule file, one
   process per rank over gloo, with the same AdamW, learning-rate schedule,
   gradient clipping and the same batches (kaiten's data order, replayed);
3. prints both loss curves and tokens/s; --json writes them.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "oracle"))
import torch_checks  # noqa: E402

M64 = (1 << 64) - 1
VAL_FRACTION = 0.1  # KT_DATA_VAL_FRACTION
MIN_LR_RATIO = 0.1  # kaiten's cosine floor

# ---- kaiten's checkpoint file -------------------------------------------------

HEADER = struct.Struct("<8sI7IQ4IddQIII4x")  # file_header in src/train/checkpoint.c


def read_checkpoint(path):
    """{"header": {...}, "units": [np.float32 parameters of each unit]}."""
    with open(path, "rb") as f:
        data = f.read()
    fields = HEADER.unpack_from(data, 0)
    if fields[0] != b"KAITENCK" or fields[1] != 1:
        sys.exit(f"bench: {path} is not a version-1 kaiten checkpoint")
    names = ("kind", "layers", "hidden", "heads", "seq_len", "vocab", "tie")
    header = dict(zip(names, fields[2:9]))
    units, per = fields[-3], fields[-2]
    pos, out = HEADER.size, []
    for _ in range(units):
        count, _crc = struct.unpack_from("<QI", data, pos)
        pos += 12
        out.append(np.frombuffer(data, dtype="<f4", count=count, offset=pos).copy())
        pos += 4 * count * (1 + per)
    return {"header": header, "units": out}


# ---- kaiten's batches (src/nn/data.c), replayed -----------------------------


def _mix(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def _permute(x, n, key):
    if n <= 1:
        return 0
    bits = 0
    while (1 << bits) < n:
        bits += 1
    half = (bits + 1) // 2
    mask = (1 << half) - 1
    while True:
        left, right = x >> half, x & mask
        for rnd in range(4):
            f = _mix((right ^ key ^ (((rnd + 1) * 0x9E3779B97F4A7C15) & M64)) & M64) & mask
            left, right = right, left ^ f
        x = (left << half) | right
        if x < n:
            return x


def train_batch(text, seed, step, micro_batches, b, T):
    """The tokens and targets kaiten trains on at step (one replica, K = 1):
    micro-batch j is rows j*b .. j*b+b-1."""
    train_len = len(text) - int(len(text) * VAL_FRACTION)
    W = train_len // T - 1
    tok = np.zeros((micro_batches * b, T), dtype=np.int64)
    tgt = np.zeros_like(tok)
    for row in range(micro_batches * b):
        n = step * micro_batches * b + row
        key = _mix((seed * 0x2545F4914F6CDD1D + n // W) & M64)
        offset = _mix(key ^ 0x5851F42D4C957F2D) % T
        start = offset + _permute(n % W, W, key) * T
        tok[row] = np.frombuffer(text, dtype=np.uint8, count=T, offset=start)
        tgt[row] = np.frombuffer(text, dtype=np.uint8, count=T, offset=start + 1)
    return torch.from_numpy(tok), torch.from_numpy(tgt)


def kaiten_lr(opt, step):
    """kt_optim_lr: linear warm-up, then cosine to MIN_LR_RATIO * lr."""
    lr, warm, decay = opt["lr"], opt["warmup_steps"], opt["decay_steps"]
    if warm > 0 and step < warm:
        return lr * (step + 1) / warm
    if decay <= 0 or decay - warm <= 0:
        return lr
    progress = min(1.0, (step - warm) / (decay - warm))
    low = lr * MIN_LR_RATIO
    return low + 0.5 * (lr - low) * (1 + math.cos(math.pi * progress))


# ---- the model, unit by unit ---------------------------------------------------


class Embed(nn.Module):
    def __init__(self, V, T, C, flat):
        super().__init__()
        self.wte = nn.Parameter(torch.from_numpy(flat[: V * C].reshape(V, C)).clone())
        self.wpe = nn.Parameter(torch.from_numpy(flat[V * C:].reshape(T, C)).clone())

    def forward(self, tokens):
        return self.wte[tokens] + self.wpe[: tokens.shape[1]]


def _take(flat, pos, *shape):
    n = int(np.prod(shape))
    return nn.Parameter(torch.from_numpy(flat[pos: pos + n].reshape(shape)).clone()), pos + n


class Block(nn.Module):
    def __init__(self, C, NH, flat):
        super().__init__()
        self.C, self.NH = C, NH
        p = 0
        self.ln1w, p = _take(flat, p, C)
        self.ln1b, p = _take(flat, p, C)
        self.qkvw, p = _take(flat, p, 3 * C, C)
        self.qkvb, p = _take(flat, p, 3 * C)
        self.attprojw, p = _take(flat, p, C, C)
        self.attprojb, p = _take(flat, p, C)
        self.ln2w, p = _take(flat, p, C)
        self.ln2b, p = _take(flat, p, C)
        self.fcw, p = _take(flat, p, 4 * C, C)
        self.fcb, p = _take(flat, p, 4 * C)
        self.fcprojw, p = _take(flat, p, C, 4 * C)
        self.fcprojb, p = _take(flat, p, C)
        assert p == flat.size

    def forward(self, x):
        B, T, C = x.shape
        h = F.layer_norm(x, (C,), self.ln1w, self.ln1b, 1e-5)
        q, k, v = F.linear(h, self.qkvw, self.qkvb).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.NH, C // self.NH).transpose(1, 2)  # noqa: E731
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, C), self.attprojw, self.attprojb)
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, 1e-5)
        h = F.gelu(F.linear(h, self.fcw, self.fcb), approximate="tanh")
        return x + F.linear(h, self.fcprojw, self.fcprojb)


class Head(nn.Module):
    def __init__(self, V, C, flat):
        super().__init__()
        p = 0
        self.lnfw, p = _take(flat, p, C)
        self.lnfb, p = _take(flat, p, C)
        self.headw, p = _take(flat, p, V, C)

    def forward(self, x):
        return F.linear(F.layer_norm(x, (x.shape[-1],), self.lnfw, self.lnfb, 1e-5), self.headw)


def unit_module(cfg, u, flat):
    L, C, V, T, NH = cfg["layers"], cfg["hidden"], cfg["vocab"], cfg["seq_len"], cfg["heads"]
    if u == 0:
        return Embed(V, T, C, flat)
    if u == L + 1:
        return Head(V, C, flat)
    return Block(C, NH, flat)


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- torch's run ---------------------------------------------------------------


def torch_worker(rank, a, port, result_path):
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // a["p"]))
    dist.init_process_group("gloo", rank=rank, world_size=a["p"])
    ck = read_checkpoint(a["init"])
    cfg = a["config"]
    model, layout, opt_cfg = cfg["model"], cfg["layout"], cfg["optimizer"]
    mapping = torch_checks.stage_map(torch_checks.read_actions(a["schedule_file"]))
    n_stages = max(mapping) + 1
    offsets = np.cumsum([0] + layout["partition"])
    local = [s for s in range(n_stages) if mapping[s] == rank]
    stages = []
    for s in local:
        units = [unit_module(model, u, ck["units"][u]) for u in range(offsets[s], offsets[s + 1])]
        stages.append(PipelineStage(nn.Sequential(*units), s, n_stages, torch.device("cpu")))
    sched = _PipelineScheduleRuntime(stages, layout["m"], loss_fn=cross_entropy)
    sched._load_csv(a["schedule_file"], format="compute_only")
    params = [q for st in stages for q in st.submod.parameters()]
    opt = torch.optim.AdamW(params, lr=opt_cfg["lr"], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    with open(a["data"], "rb") as f:
        text = f.read()
    losses, seconds = [], []
    last = n_stages - 1 in local
    for step in range(a["steps"]):
        tok, tgt = train_batch(text, model["seed"], step, layout["m"], layout["b"], model["seq_len"])
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        out = []
        sched.step(*((tok,) if 0 in local else ()), target=tgt if last else None,
                   losses=out if last else None)
        # kaiten's clipping: the global norm over every stage, scale = clip / norm above clip
        sq = torch.zeros(1, dtype=torch.float64)
        for q in params:
            sq += q.grad.double().pow(2).sum()
        dist.all_reduce(sq)
        norm = math.sqrt(float(sq))
        scale = opt_cfg["grad_clip"] / norm if opt_cfg["grad_clip"] > 0 and norm > opt_cfg["grad_clip"] else 1.0
        for q in params:
            q.grad.mul_(scale)
        for group in opt.param_groups:
            group["lr"] = kaiten_lr(opt_cfg, step)
        opt.step()
        loss = torch.tensor([float(torch.stack(out).detach().mean()) if last else 0.0], dtype=torch.float64)
        dist.all_reduce(loss)
        dist.barrier()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(loss))
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump({"losses": losses, "step_seconds": seconds}, f)
    dist.destroy_process_group()


def run_torch(a):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.path.join(a["tmp"], "torch.json")
    mp.start_processes(torch_worker, args=(a, port, path), nprocs=a["p"], join=True,
                       start_method="spawn")
    with open(path) as f:
        return json.load(f)


# ---- kaiten's run --------------------------------------------------------------


def run_kaiten(args, tmp, data):
    k = args.kaiten
    sched = os.path.join(tmp, "schedule.csv")
    subprocess.run([k, "sim", "--schedule", args.schedule, "-p", str(args.p), "-m", str(args.m),
                    "--format", "torch-csv", "-o", sched], check=True, capture_output=True)
    init, run_dir = os.path.join(tmp, "init.ckpt"), os.path.join(tmp, "run")
    cmd = [k, "train", "--model", "gpt", "--schedule-file", sched, "--layers", str(args.layers),
           "--hidden", str(args.hidden), "--heads", str(args.heads), "--seq-len", str(args.seq_len),
           "--micro-batch-size", str(args.b), "--steps", str(args.steps), "--data", data,
           "--val-every", "0", "--save-init", init, "--run-dir", run_dir, "--no-live",
           "--format", "json"]
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = json.loads(p.stdout)
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    return sched, init, config, out


def default_data(tmp):
    """Text both sides train on: the repository's documentation."""
    path = os.path.join(tmp, "docs.txt")
    with open(path, "wb") as out:
        for name in sorted(os.listdir(os.path.join(REPO, "docs"))) + ["../README.md"]:
            if name.endswith(".md"):
                with open(os.path.join(REPO, "docs", name), "rb") as f:
                    out.write(f.read())
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaiten", default=os.path.join(REPO, "build", "kaiten"))
    ap.add_argument("--schedule", default="zb-h1")
    ap.add_argument("-p", type=int, default=2)
    ap.add_argument("-m", type=int, default=4)
    ap.add_argument("-b", type=int, default=4, help="samples per micro-batch")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--data", help="training text (default: docs/*.md and README.md)")
    ap.add_argument("--json", help="write both runs to this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or default_data(tmp)
        sched, init, config, kout = run_kaiten(args, tmp, data)
        tout = run_torch({"p": args.p, "steps": args.steps, "schedule_file": sched, "init": init,
                          "config": config, "data": data, "tmp": tmp})
    tokens = args.m * args.b * args.seq_len
    k_tps = kout["tokens_per_s"]
    t_tps = tokens * len(tout["step_seconds"]) / sum(tout["step_seconds"])
    print(f"{args.schedule} P={args.p} M={args.m} b={args.b}, GPT L={args.layers} C={args.hidden} "
          f"T={args.seq_len}, {args.steps} steps, torch {torch.__version__}")
    print(f"{'step':>4} {'kaiten loss':>12} {'torch loss':>12} {'rel diff':>9}")
    for i, (x, y) in enumerate(zip(kout["losses"], tout["losses"])):
        print(f"{i + 1:>4} {x:>12.6f} {y:>12.6f} {abs(x - y) / abs(y):>9.2e}")
    print(f"tokens/s: kaiten {k_tps:.0f} (threads), torch {t_tps:.0f} (processes, gloo); "
          f"kaiten/torch {k_tps / t_tps:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "kaiten": kout, "torch": tout, "torch_tokens_per_s": t_tps,
                       "torch_version": torch.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
