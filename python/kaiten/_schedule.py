"""Schedules, simulations and comparisons: `kaiten sim` and `kaiten compare`
in Python, with the same names and numbers (the CLI's rules over the same
library calls)."""
import ctypes
import json
import math
import os

from . import _ffi
from ._ffi import KaitenError, lib, enc, dec, quote

NOTATIONS = {"auto": 0, "current": 1, "legacy": 2}
_AUTO_KINDS = ("zb-auto", "zbv-auto")
OPTIMAL = "optimal"  # the exact search: not a generator kind


def _optimal_kind():
    """The kind number the library gives the exact search (KT_SIM_OPTIMAL,
    one past the generators)."""
    return len(schedules())


def schedules():
    """Every schedule name kaiten generates, in the CLI's order."""
    return dec(lib.kt_gen_kind_list()).split(", ")


def _kind(name):
    k = lib.kt_gen_kind_from_name(enc(name, "schedule")) if isinstance(name, str) else -1
    if k < 0:
        raise KaitenError("EINVAL", f"unknown schedule {quote(name)} (known: "
                                    f"{', '.join(schedules())})")
    return k


def _kind_name(k):
    return dec(lib.kt_gen_kind_name(k))


def _placement_name(p):
    return dec(lib.kt_placement_name(p))


def _costs_json(costs):
    """costs (a dict in the cost-file format, or None) as JSON text."""
    try:
        return json.dumps(dict(costs or {}), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise KaitenError("EINVAL", f"costs {quote(costs)}: {quote(str(e), 120)}") from None


class Costs:
    """A cost table in the library: the costs as given and how the CLI's
    cost basis turns them into a schedule's stage costs."""

    def __init__(self, costs=None, per_stage=False):
        text = _costs_json(costs)
        self.given = dict(costs or {})
        self.per_stage = bool(per_stage)
        self.handle = _ffi.costs_handle()
        _ffi.call(lib.kt_costs_parse_json, self.handle, enc(text, "costs"), b"costs")
        if lib.kt_costs_compute_free(self.handle):
            raise KaitenError("EINVAL", "tf, tb and tw are all 0: every action takes no time, so "
                                        "there is no makespan or bubble to compute; give a cost "
                                        "above 0")

    @property
    def basis(self):
        return "stage" if self.per_stage else "rank"

    def for_chunks(self, v):
        """The stage costs of a schedule with v chunks per rank: the given
        costs divided by v on the rank basis (kt_costs_for_chunks)."""
        h = _ffi.costs_handle()
        _ffi.call(lib.kt_costs_for_chunks, self.handle, 1 if self.per_stage else v, h)
        return h

    def json(self):
        return json.loads(_ffi.text_call(lib.kt_ffi_costs_json, self.handle))


def _table_json(h):
    return json.loads(_ffi.text_call(lib.kt_ffi_costs_json, h))


def _parse_mem_limit(mem_limit):
    """(value, is_fraction): a number in M_B units, or "0.5x", a fraction of
    1F1B's peak on the same model (as --mem-limit reads it)."""
    if mem_limit is None:
        return 0.0, False
    ok = isinstance(mem_limit, str) or (isinstance(mem_limit, (int, float))
                                        and not isinstance(mem_limit, bool))
    text = str(mem_limit).strip() if ok and len(str(mem_limit)) <= 64 else ""
    frac = text[-1:] in ("x", "X") and len(text) > 1
    try:
        x = float(text[:-1] if frac else text)
    except ValueError:
        x = float("nan")
    if not (x >= 0) or x > KT_COST_MAX:
        raise KaitenError("EINVAL", f"mem_limit {quote(mem_limit)}: expected M_B units per rank (12) "
                                    f"or a fraction of 1F1B's peak (0.5x), a number up to "
                                    f"{KT_COST_MAX:g}")
    if x < KT_COST_MIN:  # 0 and tiny values alike, as --mem-limit reads them
        raise KaitenError("EINVAL", f"mem_limit {quote(mem_limit)}: expected a limit above 0 (at "
                                    f"least {KT_COST_MIN:g}); leave mem_limit out (None) for the "
                                    "schedule's default (1F1B's peak)")
    return x, frac


KT_COST_MIN, KT_COST_MAX = 1e-15, 1e15  # kaiten/costs.h: every cost and memory value's range


def _mem_limit_units(ml, kind, p, m, v, stage_costs):
    value, frac = ml
    if not frac:
        return value
    return value * lib.kt_ffi_1f1b_peak(kind, p, v, m, stage_costs)


class Simulation(dict):
    """One simulation, as `kaiten sim --format json` writes it (the dict's
    keys), with the usual figures as attributes."""

    @property
    def period(self):
        """The step time in steady state, what a run takes per step, under
        step_sync (docs/schedules.md, "What a step is")."""
        return self["period"]

    @property
    def step_sync(self):
        """"overlap" or "barrier": how a rank goes to its next step."""
        return self["step_sync"]

    @property
    def makespan(self):
        """One step alone: the last action's end less the first's start."""
        return self["makespan"]

    @property
    def bubble(self):
        return self["bubble_ratio"]

    @property
    def peak_memory(self):
        """The largest peak over the ranks (M_B units, or what the costs use)."""
        return self["peak_memory"]

    @property
    def rank_peak_memory(self):
        """Each rank's peak activation memory, rank 0 first."""
        return [r["peak_memory"] for r in self["ranks"]]

    @property
    def lower_bound(self):
        """No order of this layout within lower_bound_memory per rank is
        faster (None when there is no bound: lower_bound_why says why)."""
        return self["lower_bound"]

    @property
    def gap(self):
        """period / lower_bound - 1 (None without a bound)."""
        return self["gap"]


class Schedule:
    """A pipeline schedule: per-rank action lists with its stage costs.
    Made by kaiten.schedule() (a generator) or kaiten.load() (a file)."""

    def __init__(self, sched, costs, kind, program=None, lowered=None, mem_limit=None,
                 search=None):
        self._sched = sched      # the compute schedule (a handle)
        self._program = program  # a lowered file (SEND/RECV), run as written
        self._lowered = lowered  # a file's communication actions, checked by validate()
        self._costs = costs      # Costs, as given
        self._kind = kind        # generator kind, _optimal_kind(), or -1 for a file
        self._search = search    # optimal: the search's figures (a handle)
        self._stage_costs = costs.for_chunks(self.v)
        self.mem_limit = mem_limit  # zb-auto, zbv-auto, optimal: the limit kept (M_B units)
        self._sim = None

    # ---- shape ----------------------------------------------------------------
    def _shape(self):
        shape = (ctypes.c_int * 5)()
        lib.kt_ffi_schedule_shape(self._sched, shape)
        return list(shape)

    @property
    def name(self):
        return dec(lib.kt_ffi_schedule_name(self._sched))

    @property
    def p(self):
        """Pipeline ranks."""
        return self._shape()[0]

    ranks = p

    @property
    def v(self):
        """Chunks (stages) per rank: the most any rank holds."""
        return self._shape()[1]

    @property
    def m(self):
        """Micro-batches per step."""
        return self._shape()[2]

    @property
    def n_stages(self):
        return self._shape()[3]

    @property
    def placement(self):
        """"loop", "v" or "explicit"."""
        return _placement_name(self._shape()[4])

    @property
    def stage_ranks(self):
        """The rank of each stage."""
        return [lib.kt_stage_rank(self._sched, s) for s in range(self.n_stages)]

    @property
    def costs(self):
        """The stage costs the schedule runs with, as the CLI's JSON writes them."""
        return _table_json(self._stage_costs)

    @property
    def cost_basis(self):
        return self._costs.basis

    def actions(self):
        """Each rank's actions in order, as text ("0F0", "3I2", ...)."""
        rows = self.to_csv().splitlines()
        return [[c for c in row.split(",") if c] for row in rows]

    def __repr__(self):
        return (f"<kaiten.Schedule {self.name} P={self.p} V={self.v} M={self.m} "
                f"placement={self.placement}>")

    # ---- checks and simulation ------------------------------------------------
    def validate(self, torch_version="2.15"):
        """Checks every (stage, micro-batch) runs one F and one complete
        backward on its rank in a valid order, without deadlock (and a
        lowered file's sends, receives and waits). Raises KaitenError
        (EINVALID_SCHEDULE, EDEADLOCK) with the reason; returns True."""
        _ffi.call(lib.kt_schedule_validate, self._sched)
        if self._lowered is not None:
            _ffi.call(lib.kt_lowered_validate_ir, self._lowered, _torch_ir(torch_version))
        return True

    def _simulated(self):
        """The simulation's handles (simulated once) and its info, as the
        CLI describes them (kt_sim_info_describe: closed forms, the lower
        bound, the search's figures)."""
        if self._sim is None:
            run = self._program if self._program is not None else self._sched
            out = ctypes.c_void_p()
            _ffi.long_call(lib.kt_ffi_simulate, run, self._stage_costs, ctypes.byref(out))
            sim = _ffi.Handle(out.value, lib.kt_ffi_sim_free)
            limit = -1.0 if self.mem_limit is None else self.mem_limit
            ptr = _ffi.on_worker(lib.kt_ffi_info_new, self._sched, self._stage_costs,
                                 enc(self.cost_basis), self._kind, limit, self._search, sim)
            self._sim = (sim, _ffi.Handle(ptr, lib.kt_ffi_info_free))
        return self._sim

    def _render(self, sim, info, events):
        return _ffi.text_call(lib.kt_ffi_sim_json, info, sim, events)

    def simulate(self, events=False):
        """Runs the schedule against its costs (event by event). Returns a
        Simulation: `kaiten sim --format json`'s fields (makespan,
        bubble_ratio, peak_memory, ranks[...], and events[...] when events
        is True)."""
        sim, info = self._simulated()
        return Simulation(json.loads(self._render(sim, info, 1 if events else 0)))

    # ---- outputs ------------------------------------------------------------------
    def to_csv(self, format="compute_only", path=None, notation="current", torch_version="2.15"):
        """PyTorch's CSV: "compute_only" (what _load_csv(format="compute_only")
        reads; `kaiten sim --format torch-csv`) or "compute_comms" (the
        lowered form with SEND/RECV, WAIT_SEND and REDUCE_GRAD for torch
        2.15's _PipelineScheduleRuntime; --format torch-csv-comms).
        notation "legacy" writes B as BW and I as B. Written to path when
        given; the text is returned."""
        if notation not in ("current", "legacy"):
            raise KaitenError("EINVAL", f"notation {quote(notation)}: expected current or legacy")
        ir = _torch_ir(torch_version)
        if format == "compute_only":
            text = _ffi.text_call(lib.kt_ffi_schedule_write, self._sched, NOTATIONS[notation])
        elif format == "compute_comms":
            lowered = _ffi.schedule_handle()
            _ffi.call(lib.kt_schedule_lower_ir, self._sched, ir, lowered)
            text = _ffi.text_call(lib.kt_ffi_schedule_write, lowered, NOTATIONS[notation])
        else:
            raise KaitenError("EINVAL", f"format {quote(format)}: expected compute_only or "
                                        "compute_comms")
        if path is not None:
            _write(path, text)
        return text

    def to_text(self):
        """kaiten's text form (a header line, one line per rank)."""
        return _ffi.text_call(lib.kt_ffi_schedule_write, self._sched, -1)

    def gantt(self, width=120):
        """The terminal chart `kaiten sim` draws: a Gantt chart (one row per
        rank), the metrics table and the cost basis, width columns wide
        (40..100000, as --width)."""
        width = _ffi.int_arg("width", width, 40, 100000)
        sim, info = self._simulated()
        return _ffi.text_call(lib.kt_ffi_sim_gantt, info, sim, width)

    def report(self, path, title=None):
        """Writes the self-contained HTML report (`kaiten sim --report`):
        Gantt, memory over time, per-rank busy and idle, configuration."""
        sim, info = self._simulated()
        if title is None:
            title = f"kaiten sim: {self.name}, P={self.p} V={self.v} M={self.m}"
        _report(path, title, [(self.name, info, sim, None)], self.p, self.m, self._costs)
        return path


def _torch_ir(version):
    ir = ctypes.c_int()
    _ffi.call(lib.kt_torch_ir_from_version, enc(version), ctypes.byref(ir))
    return ir.value


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _report(path, title, entries, p, m, costs):
    """entries: (name, info, sim, reason) with info/sim None where it does not apply."""
    n = len(entries)
    infos = (ctypes.c_void_p * n)(*[e[1].ptr if e[1] else None for e in entries])
    sims = (ctypes.c_void_p * n)(*[e[2].ptr if e[2] else None for e in entries])
    names = (ctypes.c_char_p * n)(*[enc(e[0], "name") for e in entries])
    reasons = (ctypes.c_char_p * n)(*[enc(e[3], "reason") for e in entries])
    _ffi.long_call(lib.kt_ffi_report, enc(os.fspath(path), "path"), enc(title, "title"), n, infos,
                   sims, names, reasons, p, m, enc(costs.basis), costs.handle, keep=entries)


def _resolve_kind(name, placement):
    """The generator for name in the placement asked: zb-auto searches in
    loop placement, zbv-auto in v; placement "v" turns zb-auto into
    zbv-auto. Any other schedule has one placement and must match."""
    k = _kind(name)
    if placement is None:
        return k
    if placement not in ("loop", "v"):
        raise KaitenError("EINVAL", f"placement {quote(placement)}: expected loop or v")
    if _kind_name(k) in _AUTO_KINDS:
        return _kind("zbv-auto" if placement == "v" else "zb-auto")
    own = _placement_name(lib.kt_gen_kind_placement(k))
    if own != placement:
        same = [s for s in schedules()
                if _placement_name(lib.kt_gen_kind_placement(_kind(s))) == placement]
        raise KaitenError("EINVAL", f"{_kind_name(k)} places its stages in {own} placement, not "
                                    f"{placement} (schedules in {placement}: {', '.join(same)})")
    return k


def _check_size(what, value, lo, hi):
    _ffi.int_arg(what, value, lo, hi)


def _generate(kind, p, m, v, costs, ml, thorough=False):
    """(schedule handle, stage costs handle, effective limit or None) or KaitenError."""
    stage = costs.for_chunks(v)
    limit = _mem_limit_units(ml, kind, p, m, v, stage)
    sched = _ffi.schedule_handle()
    _ffi.long_call(lib.kt_ffi_generate, kind, p, v, m, stage, limit, 1 if thorough else 0, sched)
    effective = None
    if _kind_name(kind) in _AUTO_KINDS:
        effective = lib.kt_ffi_mem_limit(p, v, m, stage, limit)
    return sched, stage, effective


def _time_limit(time_limit):
    """--time-limit's range: seconds in 0.001..1e6."""
    return _ffi.num_arg("time_limit", time_limit, 1e-3, 1e6)


def _optimal(p, m, v, costs, ml, time_limit):
    """The exact search's order with v chunks per rank (1: loop, 2: v
    placement), as `kaiten sim --schedule optimal` makes it: (schedule
    handle, search handle, the limit it kept)."""
    like = _kind("zbv-auto" if v == 2 else "zb-auto")
    stage = costs.for_chunks(v)
    limit = _mem_limit_units(ml, like, p, m, v, stage)
    sched, out = _ffi.schedule_handle(), ctypes.c_void_p()
    _ffi.long_call(lib.kt_ffi_optimal, p, v, m, stage, limit, _time_limit(time_limit), sched,
                   ctypes.byref(out))
    search = _ffi.Handle(out.value, lib.kt_ffi_search_free)
    return sched, search, lib.kt_ffi_mem_limit(p, v, m, stage, limit)


def schedule(name, stages, microbatches, costs=None, mem_limit=None, placement=None, chunks=None,
             per_stage=False, time_limit=10, thorough=False):
    """Generates a schedule, as `kaiten sim --schedule NAME -p P -m M` does.

    name          gpipe, 1f1b, interleaved, looped-bfs, zb-h1, zb-h2, zbv, dualpipev,
                  zb-auto, zbv-auto, interleaved-zb, v-half, v-min (kaiten.schedules()),
                  or "optimal": the fastest order, proven by an exact search (small
                  problems: P <= 8, M <= 64; V = 1, or 2 in v placement)
    stages        the pipeline's ranks P (the CLI's -p)
    microbatches  M per step
    costs         {"tf", "tb", "tw", "comm", "mem_act", "mem_wgrad", ...}: numbers, or
                  lists with one value per stage (the cost-file format, --costs)
    mem_limit     zb-auto, zbv-auto, optimal: memory per rank in M_B units, or "0.5x" of
                  1F1B's peak
    placement     "loop" or "v": zb-auto searches in that placement (v = zbv-auto);
                  optimal: V = 2 in v placement
    chunks        V, chunks per rank (default: the schedule's own; optimal 1)
    per_stage     scalar costs are per stage, not one rank's share of the model
    time_limit    optimal: the search's seconds (--time-limit); past it, the best order
                  found, with its gap to the lower bound
    thorough      zb-auto, zbv-auto: the thorough search (--thorough): sometimes a
                  faster order, at 10-1000x the time
    """
    _check_size("stages", stages, 1, 4096)
    _check_size("microbatches", microbatches, 1, 1000000)
    if chunks is not None:
        _check_size("chunks", chunks, 1, 64)
    c = Costs(costs, per_stage)
    ml = _parse_mem_limit(mem_limit)
    if name == OPTIMAL:
        if placement not in (None, "loop", "v"):
            raise KaitenError("EINVAL", f"placement {quote(placement)}: expected loop or v")
        v = chunks if chunks else (2 if placement == "v" else 1)
        if placement and (v == 2) != (placement == "v"):
            raise KaitenError("EINVAL", f"optimal with {v} chunks per rank places its stages in "
                                        f"{'v' if v == 2 else 'loop'} placement, not {placement}")
        sched, search, limit = _optimal(stages, microbatches, v, c, ml, time_limit)
        return Schedule(sched, c, _optimal_kind(), mem_limit=limit, search=search)
    kind = _resolve_kind(name, placement)
    v = chunks if chunks else lib.kt_gen_default_chunks(kind)
    sched, _, effective = _generate(kind, stages, microbatches, v, c, ml, thorough)
    return Schedule(sched, c, kind, mem_limit=effective)


def load(source, costs=None, per_stage=False, notation="auto", torch_version="2.15", name=None):
    """Reads a schedule file (PyTorch CSV, compute-only or lowered, either
    notation; or kaiten's text form), as `kaiten sim --schedule-file` does,
    and validates it. source: a path, or the text itself when it holds a
    newline or a comma (and names no file)."""
    if not isinstance(notation, str) or notation not in NOTATIONS:
        raise KaitenError("EINVAL", f"notation {quote(notation)}: expected auto, current or legacy")
    if not isinstance(source, (str, bytes, os.PathLike)):
        raise KaitenError("EINVAL", f"source {quote(source)}: expected a path or a schedule's text")
    src, label = os.fspath(source), name
    sched, lowered = _ffi.schedule_handle(), _ffi.schedule_handle()
    info = (ctypes.c_long * 3)()
    raw = enc(src, "source")
    is_text = not isinstance(source, os.PathLike) and (b"\n" in raw or b"," in raw)
    if not is_text or os.path.exists(raw):
        # a path: read as the CLI reads --schedule-file (bounded; a NUL byte
        # or an endless line stops it at once)
        _ffi.long_call(lib.kt_ffi_parse_file, raw, NOTATIONS[notation], sched, lowered, info)
        label = label or os.path.basename(raw.decode(errors="replace")).split(".", 1)[0]
    else:
        _ffi.long_call(lib.kt_ffi_parse, raw, NOTATIONS[notation], sched, lowered, info)
    if not dec(lib.kt_ffi_schedule_name(sched)):
        lib.kt_ffi_schedule_set_name(sched, enc(label or "schedule", "name"))
    s = Schedule(sched, Costs(costs, per_stage), -1, program=lowered if info[2] > 0 else None,
                 lowered=lowered if info[1] > 0 else None)
    s.validate(torch_version)
    return s
