"""Real execution: torch 2.15's _PipelineScheduleRuntime runs kaiten's
schedule files on CPU with the gloo backend, one process per rank, and
torch's ScheduleGPipe runs the same model on the same data as the
reference. Both train a small MLP for a few SGD steps; the per-step losses
must agree.
"""
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_checks  # noqa: E402

HIDDEN, LAYERS, MICRO, STEPS, LR = 16, 8, 2, 3, 0.05


def _stage_module(layers, s, n_stages):
    per = LAYERS // n_stages
    return nn.Sequential(*[nn.Sequential(layers[i], nn.Tanh()) for i in range(s * per, (s + 1) * per)])


def _run_job(rank, p, m, job):
    """One training run on this rank; the per-step losses (every rank)."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleGPipe, _PipelineScheduleRuntime

    torch.manual_seed(0)
    layers = [nn.Linear(HIDDEN, HIDDEN) for _ in range(LAYERS)]  # same weights in every run
    if job["file"] is None:
        n_stages, mapping = p, {s: s for s in range(p)}
    else:
        mapping = torch_checks.stage_map(torch_checks.read_actions(job["file"]))
        n_stages = max(mapping) + 1
    local = [s for s in range(n_stages) if mapping[s] == rank]
    stages = [PipelineStage(_stage_module(layers, s, n_stages), s, n_stages, torch.device("cpu"))
              for s in local]
    mse = nn.MSELoss()
    if job["file"] is None:
        sched = ScheduleGPipe(stages[0], m, loss_fn=mse)
    else:
        sched = _PipelineScheduleRuntime(stages, m, loss_fn=mse)
        sched._load_csv(job["file"], format=job["format"])
    params = [q for st in stages for q in st.submod.parameters()]
    opt = torch.optim.SGD(params, lr=LR)
    out = []
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(m * MICRO, HIDDEN, generator=g)
        y = torch.randn(m * MICRO, HIDDEN, generator=g)
        opt.zero_grad()
        losses = []
        args = (x,) if 0 in local else ()
        last = n_stages - 1 in local
        sched.step(*args, target=y if last else None, losses=losses if last else None)
        opt.step()
        mean = torch.tensor([float(torch.stack(losses).detach().mean()) if last else 0.0], dtype=torch.float64)
        dist.all_reduce(mean)  # only the last stage's owner adds a value
        out.append(float(mean))
    return out


def _worker(rank, p, m, port, jobs, result_path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=p)
    results = {}
    for job in jobs:
        try:
            results[job["name"]] = {"losses": _run_job(rank, p, m, job)}
        except Exception as e:  # recorded, then every rank moves on together
            results[job["name"]] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        dist.barrier()
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(p, m, jobs, result_path):
    """Runs jobs ([{name, file|None, format}]) on p processes; {name: {losses|error}}."""
    mp.start_processes(_worker, args=(p, m, _free_port(), jobs, result_path), nprocs=p,
                       join=True, start_method="spawn")
    with open(result_path) as f:
        return json.load(f)
