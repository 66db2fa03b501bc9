"""kaiten for PyTorch pipelines (torch.distributed.pipelining, torch >= 2.15).

    profile(stage_modules, example_microbatch)   F, I, W times and M_B, M_W bytes per stage
    partition(blocks, n_stages, example_input)   where to cut a sequential model
    build_schedule(stages, n_microbatches, loss_fn, kind="zb-auto")
                                                 a _PipelineScheduleRuntime with kaiten's order
    presplit(documents, n_microbatches, budget, packing="balanced")
                                                 documents of varying length packed and
                                                 ordered (kaiten.pack) as torch's pre-split
                                                 micro-batches (step(arg_mbs=, target_mbs=))

Times are measured with torch itself, through the functions its pipeline
runtime calls (forward, then stage_backward_input and stage_backward_weight
for I and W, stage_backward for a full B), in this process with its thread
settings: measure as the ranks will run (e.g. torch.set_num_threads(1) for
one process per core). Under torch.distributed, rank 0 measures and every
rank receives its numbers, so all ranks cut and schedule alike.
"""
import os
import re
import tempfile
import time

import torch
import torch.distributed as dist

import kaiten
from kaiten._ffi import KaitenError, error

__all__ = ["Profile", "Partition", "profile", "partition", "build_schedule", "choose", "even_counts",
           "stage_costs", "presplit", "document_mask", "supports_presplit"]


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _storages(tensors, skip):
    """Bytes of the distinct storages behind tensors, leaving out those in skip."""
    seen, total = set(), 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        st = t.untyped_storage()
        key = st.data_ptr()
        if key in skip or key in seen or key == 0:
            continue
        seen.add(key)
        total += st.nbytes()
    return total


def _grads_of(param_groups):
    out = []
    for g in param_groups:
        for grads in g.get("grads") or ():
            out.extend(x for x in (grads or ()) if isinstance(x, torch.Tensor))
    return out


class _Stage:
    """One stage's measurement, each repeat as torch's runtime runs the
    stage: F, then I and W (the split backward), then F and a full B. The
    first stage's I computes nothing (its input needs no gradient; torch
    skips it) and its W is the full backward, as torch runs them."""

    def __init__(self, module, inputs, loss_fn, target, first, last):
        self.module, self.inputs, self.first, self.last = module, inputs, first, last
        self.loss_fn, self.target = loss_fn, target
        self.params = {p.untyped_storage().data_ptr() for p in module.parameters()}
        self.tf, self.ti, self.tw, self.tb = [], [], [], []
        self.saved = []

    def _fresh_inputs(self):
        return tuple(x.detach().requires_grad_(x.is_floating_point() and not self.first)
                     if isinstance(x, torch.Tensor) else x for x in self.inputs)

    def forward(self, record):
        """(inputs, outputs, roots): roots are what backward starts from."""
        inputs = self._fresh_inputs()
        saved = []

        def pack(t):
            saved.append(t)
            return t

        t0 = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = self.module(*inputs)
            roots = (self.loss_fn(out, self.target),) if self.last else _tuple(out)
        if record is not None:
            record.append(time.perf_counter() - t0)
        self.saved = saved
        return inputs, out, roots

    def _full(self, inputs, roots):
        """stage_backward as the runtime calls it (the loss alone on the last stage)."""
        from torch.distributed.pipelining._backward import stage_backward
        if self.last:
            stage_backward(roots[0], None, list(inputs))
        else:
            stage_backward(list(roots), [torch.ones_like(r) for r in roots], list(inputs))

    def split_backward(self):
        """F, I, W timed; returns (M_B, M_W) bytes of this forward."""
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight
        inputs, out, roots = self.forward(self.tf)
        # M_B: what autograd saved (inputs included, parameters not) and the
        # output the runtime keeps until the backward
        mem_act = _storages(list(self.saved) + list(_tuple(out)), self.params)
        if self.first:
            self.ti.append(0.0)
            t0 = time.perf_counter()
            self._full(inputs, roots)
            self.tw.append(time.perf_counter() - t0)
            self.saved = []
            return mem_act, mem_act  # the whole graph waits for W
        grads = None if self.last else [torch.ones_like(r) for r in roots]
        t0 = time.perf_counter()
        _, groups = stage_backward_input(list(roots), grads, list(inputs), self.module.parameters())
        self.ti.append(time.perf_counter() - t0)
        # M_W: torch keeps the graph (retain_graph) until W, and the
        # intermediates' gradients the weight gradient starts from
        mem_wgrad = _storages(list(self.saved) + _grads_of(groups), self.params)
        t0 = time.perf_counter()
        stage_backward_weight(self.module.parameters(), groups)
        self.tw.append(time.perf_counter() - t0)
        self.saved = []
        return mem_act, mem_wgrad

    def full_backward(self):
        inputs, _, roots = self.forward(None)
        t0 = time.perf_counter()
        self._full(inputs, roots)
        self.tb.append(time.perf_counter() - t0)
        self.saved = []


class Profile(dict):
    """Per-stage measurements (lists, stage 0 first): tf, tb (I: the input
    gradient), tw (W: the weight gradient), tb_full (a full backward B) in
    seconds, the fastest of the repeats; mem_act (M_B) and mem_wgrad (M_W)
    in bytes; out_bytes, the activation a stage sends on. costs() gives
    kaiten's per-stage cost table."""

    @property
    def n_stages(self):
        return len(self["tf"])

    def costs(self, comm=0.0):
        """{"tf", "tb", "tw", "mem_act", "mem_wgrad"} per stage, and comm (s per hop)."""
        c = {k: list(self[k]) for k in ("tf", "tb", "tw", "mem_act", "mem_wgrad")}
        if comm:
            c["comm"] = comm
        return c

    def load(self):
        """F + I + W of each stage: the time one micro-batch takes it."""
        return [f + i + w for f, i, w in zip(self["tf"], self["tb"], self["tw"])]


def _measure(stage_modules, example_microbatch, loss_fn, target, repeats, warmup):
    modules = list(stage_modules)
    if not modules:
        raise error("EINVAL", "profile: no stage modules")
    if loss_fn is None:
        def loss_fn(out, _target):
            return sum(o.float().sum() for o in _tuple(out))
    keep = [[p.grad for p in m.parameters()] for m in modules]
    prof = {k: [] for k in ("tf", "tb", "tw", "tb_full", "mem_act", "mem_wgrad", "out_bytes")}
    x, stages = _tuple(example_microbatch), []
    for i, mod in enumerate(modules):
        stages.append(_Stage(mod, x, loss_fn, target, i == 0, i == len(modules) - 1))
        with torch.no_grad():
            x = _tuple(mod(*x))  # the next stage's input
        prof["out_bytes"].append(_storages(x, set()) if i < len(modules) - 1 else 0)
    # every stage once per round, so that each stage's repeats spread over
    # the whole measurement instead of sharing one stretch of other load
    mems = [[] for _ in stages]
    for r in range(warmup + repeats):
        for st, mem in zip(stages, mems):
            mem.append(st.split_backward())
            st.full_backward()
            if r < warmup:
                st.tf.clear(), st.ti.clear(), st.tw.clear(), st.tb.clear()
    for st, mem in zip(stages, mems):
        # the fastest repeat: anything else on the machine only ever adds time
        for key, xs in (("tf", st.tf), ("tb", st.ti), ("tw", st.tw), ("tb_full", st.tb)):
            prof[key].append(min(xs))
        prof["mem_act"].append(max(m[0] for m in mem))
        prof["mem_wgrad"].append(max(m[1] for m in mem))
    for m, grads in zip(modules, keep):  # the parameters' gradients as they were
        for p, g in zip(m.parameters(), grads):
            p.grad = g
    return prof


def _from_rank0(value_fn, group):
    """value_fn() on rank 0 of group, its result on every rank (or locally
    without torch.distributed). When it fails on rank 0, every rank raises
    the same KaitenError (its status and message; another exception is
    EINVAL naming its type) instead of the others waiting on a peer that
    left ("Connection closed by peer")."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return value_fn()
    box, failure = [None], None
    if dist.get_rank(group) == 0:
        try:
            box = [("value", value_fn())]
        except KaitenError as e:
            box, failure = [("error", e.status, str(e))], e
        except Exception as e:  # noqa: BLE001 -- told to every rank, raised here as it was
            box, failure = [("error", "EINVAL", f"rank 0: {type(e).__name__}: {e}")], e
    dist.broadcast_object_list(box, group_src=0, group=group)
    if failure is not None:
        raise failure
    if box[0][0] == "error":
        raise error(box[0][1], box[0][2])
    return box[0][1]


def _agreed(fn, group):
    """fn() on every rank of group; when it fails on any, every rank raises
    the first failing rank's KaitenError (named by its rank on the others),
    so no rank goes on to wait for one that gave up."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return fn()
    value, mine = None, None
    try:
        value = fn()
    except KaitenError as e:
        mine = (e.status, str(e), e)
    except Exception as e:  # noqa: BLE001 -- raised on every rank as a KaitenError
        mine = ("EINVAL", f"{type(e).__name__}: {e}", e)
    seen = [None] * dist.get_world_size(group)
    dist.all_gather_object(seen, mine[:2] if mine else None, group=group)
    for r, failed in enumerate(seen):
        if failed is None:
            continue
        if mine is not None and failed == mine[:2]:
            raise mine[2]
        raise error(failed[0], f"rank {r}: {failed[1]}")
    return value


def profile(stage_modules, example_microbatch, loss_fn=None, target=None, repeats=5, warmup=1,
            group=None):
    """Measures each stage of a pipeline with torch: F, I and W times (and a
    full B), M_B and M_W bytes. stage_modules run in sequence, stage i's
    output being stage i+1's input; example_microbatch is one micro-batch
    of the first stage's input (a tensor or a tuple). The last stage's
    output goes through loss_fn(output, target) as the pipeline's loss
    does (default: the sum of the output). Each stage runs warmup + repeats
    times; times are the fastest repeat's. The modules' gradients are left as they
    were. Under torch.distributed rank 0 of group measures and broadcasts."""
    if repeats < 1 or warmup < 0:
        raise error("EINVAL", f"profile: repeats {repeats}, warmup {warmup}: need >= 1, >= 0")
    return Profile(_from_rank0(lambda: _measure(stage_modules, example_microbatch, loss_fn, target,
                                                repeats, warmup), group))


class Partition:
    """Where to cut: counts[j] blocks in stage j (bounds: [start, end) per
    stage), the measured blocks (profile, one entry per block; with an
    optimizer's share, its "optimizer" list: seconds per step) and what
    each stage costs (the sums of its blocks)."""

    def __init__(self, counts, bottleneck, block_profile, n_microbatches=1):
        self.counts = list(counts)
        self.n_microbatches = n_microbatches
        self.bottleneck = bottleneck
        self.profile = block_profile
        self.bounds, at = [], 0
        for c in self.counts:
            self.bounds.append((at, at + c))
            at += c

    @property
    def n_stages(self):
        return len(self.counts)

    def stage_profile(self):
        """The Profile of the stages: each stage's blocks summed (the
        activation it sends: its last block's)."""
        p = self.profile
        out = {k: [] for k in p}
        for a, b in self.bounds:
            for k in p:
                out[k].append(p[k][b - 1] if k == "out_bytes" else sum(p[k][a:b]))
        return Profile(out)

    def costs(self, comm=0.0):
        return self.stage_profile().costs(comm)

    def loads(self):
        """Each stage's time per micro-batch: F + I + W, and its share of
        the optimizer step where that was measured."""
        sp = self.stage_profile()
        opt = sp.get("optimizer") or [0.0] * sp.n_stages
        return [x + o / self.n_microbatches for x, o in zip(sp.load(), opt)]

    def modules(self, blocks, stage):
        """Stage's blocks as one torch.nn.Sequential."""
        a, b = self.bounds[stage]
        return torch.nn.Sequential(*list(blocks)[a:b])

    def __repr__(self):
        return f"<kaiten.torch.Partition {','.join(map(str, self.counts))}>"


def even_counts(n_blocks, n_stages, first=1, last=1):
    """PyTorch-style even split for comparison: the first block (embedding)
    and the last (head) ride with the first and last stage; the blocks in
    between are spread evenly (earlier stages take the remainder)."""
    inner = n_blocks - first - last
    base, extra = divmod(inner, n_stages)
    counts = [base + (1 if j < extra else 0) for j in range(n_stages)]
    counts[0] += first
    counts[-1] += last
    return counts


def _optimizer_time(blocks, optimizer, repeats):
    """Seconds one optimizer step takes over each block's parameters (the
    fastest of repeats, on stand-in gradients; the parameters are restored)."""
    out = []
    for b in blocks:
        params = [q for q in b.parameters() if q.requires_grad]
        if not params:
            out.append(0.0)
            continue
        saved = [(q.detach().clone(), q.grad) for q in params]
        opt = optimizer(params)
        times = []
        for _ in range(repeats + 1):
            for q in params:
                q.grad = torch.full_like(q, 1e-3)
            t0 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - t0)
        with torch.no_grad():
            for q, (data, grad) in zip(params, saved):
                q.copy_(data)
                q.grad = grad
        out.append(min(times[1:]))  # the first step also creates the optimizer's state
    return out


def partition(blocks, n_stages, example_input, loss_fn=None, target=None, mem_cap=None,
              repeats=5, warmup=1, group=None, optimizer=None, n_microbatches=None):
    """Measures every block of a sequential model (the embedding and the
    LM head are blocks too: list them first and last) and cuts it into
    n_stages contiguous stages with the exact min-max partition of F+I+W
    per micro-batch (kaiten.partition). With optimizer (a function of a
    parameter list returning a torch optimizer, e.g. lambda ps:
    torch.optim.AdamW(ps)) and n_microbatches, each block's share of the
    optimizer step (its step time / M) counts too: a block with many
    parameters (an embedding, a head) costs its rank at every step.
    mem_cap (bytes, optional) bounds each stage's activation memory at
    1F1B's in-flight count (stage j holds S - j micro-batches).
    example_input: one micro-batch for the first block. Returns a Partition."""
    blocks = list(blocks)
    if not 1 <= n_stages <= len(blocks):
        raise error("EINVAL", f"partition: {n_stages} stages for {len(blocks)} blocks: need "
                                    f"1..{len(blocks)}")
    if optimizer is not None and not n_microbatches:
        raise error("EINVAL", "partition: an optimizer's share needs n_microbatches")

    def measure():
        prof = _measure(blocks, example_input, loss_fn, target, repeats, warmup)
        opt = _optimizer_time(blocks, optimizer, repeats) if optimizer else [0.0] * len(blocks)
        prof["optimizer"] = opt
        return prof

    prof = Profile(_from_rank0(measure, group))
    m = n_microbatches or 1
    load = [x + o / m for x, o in zip(prof.load(), prof["optimizer"])]
    kw = {}
    if mem_cap:
        kw = dict(act=[max(a, w) for a, w in zip(prof["mem_act"], prof["mem_wgrad"])],
                  mult=[n_stages - j for j in range(n_stages)], mem_cap=float(mem_cap))
    counts, bottleneck = kaiten.partition(load, n_stages, **kw)
    return Partition(counts, bottleneck, prof, m)


def stage_costs(costs, n_stages):
    """A cost table of n_stages per-stage lists from a Profile, a Partition
    or a kaiten cost dict (None: unit costs)."""
    return _tables(costs, n_stages)[0]


def _tables(costs, n_stages):
    """(table, full-backward table) of n_stages stages. The first prices
    I and W as measured; the second, for schedules that run a full B, sets
    I to the measured B minus W, so that B costs what torch's full backward
    measured (less than I + W: the split pays for a second graph walk).
    A plain cost dict gives the same table twice."""
    if isinstance(costs, Partition):
        costs = costs.stage_profile()
    if costs is None:
        return None, None
    if isinstance(costs, Profile):
        table = costs.costs()
        full = dict(table, tb=[max(0.0, b - w) for b, w in zip(costs["tb_full"], costs["tw"])])
    else:
        table = full = dict(costs)
    for k, v in table.items():
        if isinstance(v, (list, tuple)) and len(v) != n_stages:
            raise error("EINVAL", f"costs: {k} has {len(v)} values for {n_stages} stages")
    return table, full


def _layout(stages):
    """(P, V, placement) of the pipeline from this rank's stages."""
    s0 = stages[0]
    p, n, r = s0.group_size, s0.num_stages, s0.group_rank
    if n % p:
        raise error("EINVAL", f"{n} stages on {p} ranks: kaiten's schedules give every rank "
                                    "the same number of stages")
    v = n // p
    mine = sorted(s.stage_index for s in stages)
    if mine == [r + k * p for k in range(v)]:
        return p, v, "loop"
    if v == 2 and mine == sorted([r, 2 * p - 1 - r]):
        return p, v, "v"
    raise error("EINVAL", f"rank {r} holds stages {mine}: expected loop placement "
                                f"({[r + k * p for k in range(v)]}) or, with 2 per rank, v "
                                f"({sorted([r, 2 * p - 1 - r])})")


# The schedules kaiten offers for a layout, for kind="auto".
_KINDS = {("loop", 1): ("gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"),
          ("loop", 2): ("interleaved", "interleaved-zb", "zb-auto"),
          ("v", 2): ("zbv", "dualpipev", "zbv-auto", "v-half", "v-min")}


def choose(p, v, placement, m, costs, mem_limit=None, kinds=None, cores=None):
    """The kaiten schedule with the smallest simulated period (a step in
    steady state under the costs' step_sync, docs/schedules.md) for these
    costs (a Profile, a Partition or a cost dict) among kinds (default:
    every kind for the layout) that keep every rank's peak within the
    memory limit (default: 1F1B's peak on the same costs). A schedule
    without I/W actions is timed with the measured full B. With cores
    (fewer than the ranks, which then share them) a step also takes at
    least all the ranks' work over the cores: a rank's idle time goes to
    another rank, and a schedule that does more work (the split backward)
    pays for it. Returns (Schedule, {kind: its time, or the reason it was
    left out})."""
    kinds = kinds or _KINDS.get((placement, v), ("zb-auto",))
    best, seen = None, {}
    limit = None
    for k in kinds:
        try:
            s = _kind_schedule(k, p, v, placement, m, costs, mem_limit)
            sim = s.simulate()
            limit = limit if limit is not None else _limit(p, v, placement, m,
                                                           _tables(costs, p * v)[0], mem_limit)
        except KaitenError as e:
            seen[k] = str(e)
            continue
        if sim.peak_memory > limit * (1 + 1e-9):
            seen[k] = f"peak memory {sim.peak_memory:g} over the limit {limit:g}"
            continue
        span = sim.period
        if cores and cores < p:
            span = max(span, sum(r["busy"] for r in sim["ranks"]) / cores)
        seen[k] = span
        if best is None or span < best[1]:
            best = (s, span)
    if best is None:
        raise error("EINVAL", f"no schedule fits: {seen}")
    return best[0], seen


def _kind_schedule(kind, p, v, placement, m, costs, mem_limit):
    """kind for these costs: generated with the measured I and W, or, when
    its order has no I (a full B everywhere), with the full-B table."""
    table, full = _tables(costs, p * v)
    s = _generate(kind, p, v, placement, m, table, mem_limit)
    if full is not table and not re.search(r"[0-9]I[0-9]", s.to_csv()):
        s = _generate(kind, p, v, placement, m, full, mem_limit)
    return s


def _generate(kind, p, v, placement, m, costs, mem_limit):
    """kind's order; the memory limit goes to the kinds that keep to one
    (the others' peaks are checked against it by choose)."""
    auto = kind in ("zb-auto", "zbv-auto")
    return kaiten.schedule(kind, p, m, costs=costs, mem_limit=mem_limit if auto else None, chunks=v,
                           placement=placement if auto else None)


def _limit(p, v, placement, m, costs, mem_limit):
    """The memory limit in the costs' units as the library reads mem_limit
    (a number, or "0.5x" of 1F1B's peak), or 1F1B's peak: the limit zb-auto
    (zbv-auto in v placement) keeps to."""
    kind = "zbv-auto" if placement == "v" else "zb-auto"
    return kaiten.schedule(kind, p, m, costs=costs, chunks=v, mem_limit=mem_limit).mem_limit


def build_schedule(stages, n_microbatches, loss_fn, kind="zb-auto", mem_limit=None, costs=None,
                   format="compute_comms", cores=None, **runtime_kwargs):
    """A torch _PipelineScheduleRuntime for this rank's stages
    (PipelineStage objects), loaded with kaiten's order: call .step() on it
    as on any torch schedule.

    kind         a kaiten schedule for the stages' layout (zb-auto: the loop
                 placement with any V; zbv-auto etc. for a V-shaped one), or
                 "auto": the fastest of them in kaiten's simulator under costs
    costs        the measured stages (profile(), partition()) or a kaiten cost
                 dict with one value per stage; None: unit costs
    mem_limit    per rank, in the costs' memory unit (bytes when measured),
                 or "0.5x" of 1F1B's peak; default 1F1B's
    format       "compute_comms": kaiten's lowered file (its SEND/RECV order);
                 "compute_only": torch lowers kaiten's compute order itself
    cores        kind "auto": the cores the ranks share, when fewer than the
                 ranks (one machine running them all); see choose()
    The order is made on the pipeline's rank 0 and sent to every rank.
    runtime_kwargs go to _PipelineScheduleRuntime (scale_grads, ...). The
    returned schedule carries the kaiten.Schedule as .kaiten_schedule."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    if not stages:
        raise error("EINVAL", "build_schedule: no stages")
    if format not in ("compute_comms", "compute_only"):
        raise error("EINVAL", f"format '{format}': expected compute_comms or compute_only")
    group = stages[0].group

    def local():
        p, v, placement = _layout(stages)
        return p, v, placement, stage_costs(costs, p * v)

    p, v, placement, table = _agreed(local, group)

    def make():
        if kind == "auto":
            s, _ = choose(p, v, placement, n_microbatches, costs, mem_limit, cores=cores)
        else:
            s = _kind_schedule(kind, p, v, placement, n_microbatches, costs, mem_limit)
        return s.to_csv(format), s.name

    text, name = _from_rank0(make, group)
    runtime = _PipelineScheduleRuntime(stages, n_microbatches, loss_fn=loss_fn, **runtime_kwargs)
    fd, path = tempfile.mkstemp(suffix=".csv", prefix="kaiten-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        runtime._load_csv(path, format=format)
    finally:
        os.unlink(path)
    runtime.kaiten_schedule = kaiten.load(text, costs=table, per_stage=True, name=name)
    return runtime


# ---- documents of varying length ---------------------------------------------


def supports_presplit():
    """Whether the installed torch's pipeline schedules take pre-split
    micro-batches (step(arg_mbs=..., target_mbs=...), torch 2.15 and later)."""
    import inspect
    from torch.distributed.pipelining.schedules import _PipelineSchedule
    return "arg_mbs" in inspect.signature(_PipelineSchedule.step).parameters


def document_mask(positions):
    """The block-diagonal causal mask of packed documents: positions (T,)
    restart at 0 with each document; True where row i may attend column j
    (j <= i in the same document). Returns a (T, T) bool tensor."""
    pos = torch.as_tensor(positions).reshape(-1)
    i = torch.arange(pos.numel(), device=pos.device)
    start = i - pos  # where each row's document starts
    return (i[None, :] <= i[:, None]) & (i[None, :] >= start[:, None])


def presplit(documents, n_microbatches, budget, packing="balanced", schedule="1f1b", stages=2,
             attn_share=0.25, pad_id=0, ignore_index=-100):
    """Packs documents (1-D integer tensors; each trains on its own next
    tokens: inputs doc[:-1], targets doc[1:]) into n_microbatches
    micro-batches of budget tokens with kaiten.pack (balanced: in the order
    with the shortest simulated step of `schedule` on `stages` ranks), in
    run order, for torch's pre-split step:

        arg_mbs, target_mbs, p = kaiten.torch.presplit(docs, 4, 1024)
        schedule.step(arg_mbs=arg_mbs)                 # first stage
        schedule.step(target_mbs=target_mbs, losses=l) # last stage

    arg_mbs[j] is (tokens (1, budget), positions (1, budget)): positions
    restart with every document (document_mask gives the block-diagonal
    attention mask), padding is pad_id with target ignore_index. p is the
    kaiten.Packing (p.tokens: real tokens per micro-batch; the step's mean
    loss divides by their sum). ValueError for a document shorter than 2
    tokens or longer than budget + 1."""
    docs = [torch.as_tensor(d).reshape(-1) for d in documents]
    if any(d.numel() < 2 or d.numel() > budget + 1 for d in docs):
        raise ValueError("presplit: every document needs 2..%d tokens (inputs and next tokens)"
                         % (budget + 1))
    p = kaiten.pack(schedule, stages, documents=[d.numel() - 1 for d in docs],
                    microbatches=n_microbatches, packing=packing, mb_tokens=budget,
                    attn_share=attn_share)
    arg_mbs, target_mbs = [], []
    for mb in p.micro_batches:
        tok = torch.full((1, budget), pad_id, dtype=torch.long)
        pos = torch.zeros((1, budget), dtype=torch.long)
        tgt = torch.full((1, budget), ignore_index, dtype=torch.long)
        at = 0
        for i in mb:
            n = docs[i].numel() - 1
            tok[0, at:at + n] = docs[i][:-1]
            tgt[0, at:at + n] = docs[i][1:]
            pos[0, at:at + n] = torch.arange(n)
            at += n
        pos[0, at:] = torch.arange(budget - at)  # padding: a document of its own
        arg_mbs.append((tok, pos))
        target_mbs.append(tgt)
    return arg_mbs, target_mbs, p
