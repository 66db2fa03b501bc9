"""torch 2.15's own checks, run on schedule files.

Everything here calls torch.distributed.pipelining itself: its action
parser, _validate_schedule, its lowering passes (_add_send_recv,
_add_wait_send), _validate_send_waits, _simulate_comms_compute, and the
loading path of _PipelineScheduleRuntime (_load_csv), with stand-in stage
objects that carry only what those functions read.
"""
import contextlib
import csv
import io
import os
import tempfile

import torch.distributed.pipelining.schedules as S
from torch.distributed.pipelining.schedules import _Action, _ComputationType as CT

# Per-stage actions torch's simulator does not model (it raises on them).
PER_STAGE = {CT.REDUCE_GRAD, CT.WAIT_REDUCE_GRAD, CT.UNSHARD, CT.RESHARD}


class StandInStage:
    """What the schedule classes read from a stage before running it."""

    def __init__(self, index, num_stages, group_size, group_rank):
        self.stage_index = index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.is_first = index == 0
        self.is_last = index == num_stages - 1
        self.stage_index_to_group_rank = {}
        self.submod = None


def read_actions(path):
    """A CSV file as torch reads it: {rank: [_Action or None]}."""
    with open(path, newline="") as f:
        return {r: [_Action.from_str(c) for c in row] for r, row in enumerate(csv.reader(f))}


def write_actions(order):
    """The CSV text torch's _dump_csv writes for an order."""
    out = io.StringIO()
    writer = csv.writer(out)
    for rank in order:
        writer.writerow(order[rank])
    return out.getvalue()


def leaves(action):
    return action.sub_actions or (action,)


def stage_map(order):
    """stage -> rank from every action, as torch's _validate_schedule infers it."""
    mapping = {}
    for rank, actions in order.items():
        for a in actions:
            if a is not None:
                for x in leaves(a):
                    if x.stage_index >= 0:
                        mapping.setdefault(x.stage_index, rank)
    return mapping


def dims(order):
    """(P, S, M) of a compute order."""
    mapping = stage_map(order)
    mbs = [x.microbatch_index for acts in order.values() for a in acts if a is not None
           for x in leaves(a) if x.microbatch_index is not None]
    return len(order), max(mapping) + 1, max(mbs) + 1


def _runtime_loader(path, fmt, p, n_stages, m):
    """Loads path as _PipelineScheduleRuntime._load_csv does on rank 0."""
    mapping = stage_map(read_actions(path))
    mine = sorted(s for s, r in mapping.items() if r == 0) or [0]
    stages = [StandInStage(s, n_stages, p, 0) for s in mine]
    sched = S._PipelineScheduleRuntime(stages, m, loss_fn=lambda a, b: a)
    sched._load_csv(path, format=fmt)
    return sched


def check_compute_only(path):
    """torch's checks on a compute-only file. Returns {check: None | error text}."""
    res = {}
    order = read_actions(path)
    p, n_stages, m = dims(order)
    mapping = None

    def attempt(name, fn):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                fn()
            res[name] = None
        except Exception as e:  # torch raises AssertionError, ValueError, RuntimeError
            res[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"

    def validate():
        nonlocal mapping
        mapping = S._validate_schedule(order, p, n_stages, m)

    attempt("_validate_schedule", validate)
    if mapping is None:
        return res
    compute = {r: [a for a in acts if a is not None] for r, acts in order.items()}
    lowered = {}

    def add_send_recv():
        lowered["comms"] = S._add_send_recv({r: list(v) for r, v in compute.items()},
                                            lambda s: mapping[s], n_stages)

    attempt("_add_send_recv", add_send_recv)
    if "comms" in lowered:
        def waits():
            lowered["waits"] = S._add_wait_send(lowered["comms"])
            S._validate_send_waits(lowered["waits"])

        attempt("_add_wait_send+_validate_send_waits", waits)
        if "waits" in lowered:
            attempt("_simulate_comms_compute", lambda: S._simulate_comms_compute(
                {r: list(v) for r, v in lowered["waits"].items()}, lambda s: mapping[s], n_stages))
    attempt("_PipelineScheduleRuntime._load_csv(compute_only)",
            lambda: _runtime_loader(path, "compute_only", p, n_stages, m))
    return res


def check_lowered(path):
    """torch's checks on a lowered (compute_comms) file."""
    res = {}
    order = read_actions(path)
    p, n_stages, m = dims(order)

    def attempt(name, fn):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                fn()
            res[name] = None
        except Exception as e:
            res[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"

    mapping = {}
    attempt("_validate_schedule", lambda: mapping.update(S._validate_schedule(order, p, n_stages, m)))
    actions = {r: [a for a in acts if a is not None] for r, acts in order.items()}
    attempt("_validate_send_waits", lambda: S._validate_send_waits(actions))
    # torch's simulator knows no per-stage action (its own lowering's
    # REDUCE_GRAD/UNSHARD included), so they are left out for it
    sim_order = {r: [a for a in acts if a.computation_type not in PER_STAGE]
                 for r, acts in actions.items()}
    if mapping:
        attempt("_simulate_comms_compute (per-stage actions left out)",
                lambda: S._simulate_comms_compute(sim_order, lambda s: mapping[s], n_stages))
    attempt("_PipelineScheduleRuntime._load_csv(compute_comms)",
            lambda: _runtime_loader(path, "compute_comms", p, n_stages, m))
    return res


# torch's schedule classes: name -> (stages per rank, placement)
TORCH_CLASSES = {
    "ScheduleGPipe": (1, "loop"),
    "Schedule1F1B": (1, "loop"),
    "ScheduleInterleaved1F1B": (2, "loop"),
    "ScheduleLoopedBFS": (2, "loop"),
    "ScheduleInterleavedZeroBubble": (2, "loop"),
    "ScheduleZBVZeroBubble": (2, "v"),
    "ScheduleDualPipeV": (2, "v"),
}


def torch_class_order(name, p, m):
    """(compute-only CSV text as _dump_csv writes it, the class object) for
    torch's schedule class at P ranks and M micro-batches; raises what torch
    raises when it refuses the sizes."""
    v, placement = TORCH_CLASSES[name]
    n = p * v
    local = [0] if v == 1 else ([0, p] if placement == "loop" else [0, 2 * p - 1])
    stages = [StandInStage(s, n, p, 0) for s in local]
    cls = getattr(S, name)
    with contextlib.redirect_stdout(io.StringIO()):
        if v == 1:
            sched = cls(stages[0], m, loss_fn=lambda a, b: a)
            # PipelineScheduleSingle has no _dump_csv: these are the rows
            # PipelineScheduleMulti._dump_csv writes for an order
            return write_actions(sched.pipeline_order), sched
        sched = cls(stages, m, loss_fn=lambda a, b: a)
        # _dump_csv(format="compute_only") writes self.pipeline_order to a file
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "order.csv")
            sched._dump_csv(f, format="compute_only")
            with open(f) as fh:
                return fh.read(), sched


def torch_own_simulation(sched):
    """torch's simulator on torch's own lowering of its own schedule."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            sched._simulate()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
