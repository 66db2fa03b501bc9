"""`kaiten compare` in Python: every applicable schedule side by side under
one cost model, with the CLI's rows (the same rules over the same calls)."""
import ctypes

from ._ffi import KaitenError, lib, dec
from . import _schedule as S


class Comparison(dict):
    """`kaiten compare --format json`'s object (p, m, v, cost_basis, costs,
    rows[]), with each applicable row's Schedule kept for reports."""

    def __init__(self, data, schedules, costs):
        super().__init__(data)
        self._schedules = schedules  # name -> Schedule, or the reason it does not apply
        self._costs = costs

    @property
    def rows(self):
        return self["rows"]

    def row(self, name):
        for r in self["rows"]:
            if r["schedule"] == name:
                return r
        raise KeyError(name)

    def schedule(self, name):
        """The Schedule of an applicable row."""
        s = self._schedules.get(name)
        if not isinstance(s, S.Schedule):
            raise KeyError(f"{name}: {s}" if s else name)
        return s

    def best(self, key="makespan"):
        """The applicable row with the smallest key (makespan by default)."""
        rows = [r for r in self["rows"] if r["applies"]]
        if not rows:
            raise KaitenError("EINVAL", "no schedule applies")
        return min(rows, key=lambda r: r[key])

    def report(self, path, title=None):
        """Writes the HTML comparison report (`kaiten compare --report`)."""
        entries = []
        for r in self["rows"]:
            s = self._schedules.get(r["schedule"])
            if isinstance(s, S.Schedule):
                sim, info = s._simulated()
                entries.append((r["schedule"], info, sim, None))
            else:
                entries.append((r["schedule"], None, None, r.get("reason", "")))
        if title is None:
            title = f"kaiten compare: P={self['p']} M={self['m']}"
        S._report(path, title, entries, self["p"], self["m"], self._costs)
        return path


def _kinds(names):
    if names is None:
        return [S._kind(n) for n in S.schedules()]
    if isinstance(names, str):
        names = names.split(",")
    kinds = []
    for n in names:
        k = S._kind(n)
        if k in kinds:
            raise KaitenError("EINVAL", f"schedules lists '{n}' twice ({n} is {S._kind_name(k)})")
        kinds.append(k)
    if not kinds:
        raise KaitenError("EINVAL", "schedules is empty")
    return kinds


def _kind_v(kind, v):
    """The V a kind runs with in a comparison: v for the chunked loop kinds."""
    default = lib.kt_schedule_default_chunks(kind)
    loop = S._placement_name(lib.kt_schedule_kind_placement(kind)) != "v"
    return v if default > 1 and loop else default


def _closed_forms(row, kind, sched, c, bubble):
    """compare's closed forms: exact only under uniform per-stage times (and
    memory) and no communication; none for a zbv order tuned to the costs."""
    if kind < 0:
        row.update(closed_form_bubble=None, closed_form_expr=None,
                   closed_form_why="a schedule file has no formula",
                   closed_form_peak_memory=None, closed_form_peak_memory_expr=None)
        return
    p, v, m = sched.p, sched.v, sched.m
    expr, mexpr = ctypes.c_char_p(), ctypes.c_char_p()
    closed = lib.kt_schedule_closed_form_bubble(kind, p, v, m, S._num(c["tf"]), S._num(c["tb"]),
                                                S._num(c["tw"]), ctypes.byref(expr))
    why = dec(lib.kt_schedule_closed_form_why_not(kind, p, v, m))
    expr = dec(expr.value)
    if any(isinstance(c[k], list) for k in ("tf", "tb", "tw")) or c["comm"] > 0:
        closed, expr = -1.0, None
        why = ("the forms assume T_comm = 0" if c["comm"] > 0
               else "the forms assume the same costs on every stage")
    cmem = lib.kt_schedule_closed_form_peak_memory(kind, p, v, m, S._num(c["mem_act"]),
                                                   S._num(c["mem_wgrad"]), ctypes.byref(mexpr))
    mexpr = dec(mexpr.value)
    if isinstance(c["mem_act"], list) or isinstance(c["mem_wgrad"], list):
        cmem, mexpr = -1.0, None
    if kind == S._kind(S._ZBV) and closed >= 0 and bubble < closed - 1e-9:
        closed = cmem = -1.0
        expr = mexpr = None
        why = "zbv's order was tuned to these costs (faster than its fixed order's form)"
    row["closed_form_bubble"] = closed if closed >= 0 else None
    row["closed_form_expr"] = expr
    if closed < 0:
        row["closed_form_why"] = why
    row["closed_form_peak_memory"] = cmem if cmem >= 0 else None
    row["closed_form_peak_memory_expr"] = mexpr


def _row(sched, kind, peak_1f1b, mem_limit):
    """One applicable row (the keys and order of the CLI's JSON)."""
    sim = sched.simulate()
    ranks = sim["ranks"]
    c = sched.costs
    row = {"schedule": sched.name if kind < 0 else S._kind_name(kind), "applies": True,
           "v": sched.v, "makespan": sim["makespan"], "bubble_ratio": sim["bubble_ratio"]}
    _closed_forms(row, kind, sched, c, sim["bubble_ratio"])
    peak = max(0.0, *[r["peak_memory"] for r in ranks])
    forms = {k: row.pop(k) for k in ("closed_form_peak_memory", "closed_form_peak_memory_expr")}
    row.update(peak_memory_first=ranks[0]["peak_memory"], peak_memory_last=ranks[-1]["peak_memory"],
               peak_memory=peak,
               peak_memory_vs_1f1b=peak / peak_1f1b if peak_1f1b and peak_1f1b > 0 else None)
    row.update(forms)
    if mem_limit is not None:
        row["mem_limit"] = mem_limit
    row.update(peak_inflight_first=ranks[0]["peak_inflight"],
               peak_inflight_last=ranks[-1]["peak_inflight"], messages=sim["messages"])
    return row


def _eval_kind(kind, p, m, v, costs, ml):
    """(Schedule, effective mem limit or None) or the reason it does not apply."""
    kv = _kind_v(kind, v)
    try:
        sched, stage, limit = S._generate(kind, p, m, kv, costs, ml)
    except KaitenError as e:
        return str(e), None
    effective = None
    if S._kind_name(kind) in S._AUTO_KINDS:
        effective = lib.kt_ffi_mem_limit(p, kv, m, stage.ptr, limit)
    return S.Schedule(sched, costs, kind, mem_limit=effective), effective


def _simulated_row(sched, kind, peak_1f1b, limit):
    try:
        return _row(sched, kind, peak_1f1b, limit), sched
    except KaitenError as e:
        return {"schedule": sched.name if kind < 0 else S._kind_name(kind), "applies": False,
                "reason": str(e)}, str(e)


def compare(stages=4, microbatches=8, schedules=None, costs=None, mem_limit=None, chunks=2,
            per_stage=False, schedule_file=None):
    """Every schedule (or those named) side by side under one cost model, as
    `kaiten compare -p P -m M --format json` does: makespan, bubble, closed
    forms, peak memory (also as a fraction of 1F1B's on the same model),
    in-flight micro-batches and messages per row; rows that do not apply
    say why. chunks: V for interleaved and looped-bfs. schedule_file (a
    path or a Schedule from kaiten.load) adds one more row; P and M then
    come from it."""
    file_sched = None
    if schedule_file is not None:
        file_sched = schedule_file if isinstance(schedule_file, S.Schedule) else \
            S.load(schedule_file, costs=costs, per_stage=per_stage)
        stages, microbatches = file_sched.p, file_sched.m
    S._check_size("stages", stages, 1, 4096)
    S._check_size("microbatches", microbatches, 1, 1000000)
    S._check_size("chunks", chunks, 2, 64)
    kinds = _kinds(schedules)
    c = S.Costs(costs, per_stage)
    ml = S._parse_mem_limit(mem_limit)
    p, m = stages, microbatches
    one, _ = _eval_kind(S._kind("1f1b"), p, m, chunks, c, ml)
    peak_1f1b = one.simulate().peak_memory if isinstance(one, S.Schedule) else None
    rows, kept = [], {}
    for k in kinds:
        name = S._kind_name(k)
        sched, limit = _eval_kind(k, p, m, chunks, c, ml)
        if not isinstance(sched, S.Schedule):
            rows.append({"schedule": name, "applies": False, "reason": sched})
            kept[name] = sched
            continue
        row, kept[name] = _simulated_row(sched, k, peak_1f1b, limit)
        rows.append(row)
    if file_sched is not None:
        fs = S.Schedule(file_sched._sched, c, -1, program=file_sched._program,
                        lowered=file_sched._lowered)
        row, kept[fs.name] = _simulated_row(fs, -1, peak_1f1b, None)
        rows.append(row)
    data = {"p": p, "m": m, "v": chunks, "cost_basis": c.basis, "costs": c.json(), "rows": rows}
    return Comparison(data, kept, c)


