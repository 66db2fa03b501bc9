"""`kaiten compare` in Python: every applicable schedule side by side under
one cost model. The rows are the CLI's: each schedule is generated and
simulated through the library, and the library fills and renders the rows
(kt_compare_row_fill, kt_render_compare_json)."""
import ctypes
import json

from ._ffi import KaitenError, lib, enc, quote
from . import _ffi
from . import _schedule as S


class Comparison(dict):
    """`kaiten compare --format json`'s object (p, m, v, cost_basis, costs,
    lower_bound, rows[]), with each applicable row's Schedule kept for
    reports."""

    def __init__(self, data, schedules, costs, text):
        super().__init__(data)
        self._schedules = schedules  # name -> Schedule, or the reason it does not apply
        self._costs = costs
        self._text = text

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

    def best(self, key="period"):
        """The applicable row with the smallest key (the period by default)."""
        rows = [r for r in self["rows"] if r["applies"]]
        if not rows:
            raise KaitenError("EINVAL", "no schedule applies")
        return min(rows, key=lambda r: r[key])

    def table(self):
        """The table `kaiten compare` prints (its default format)."""
        return self._text

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
    """The rows asked for: generator kinds, and optimal (never among all)."""
    if names is None:
        return [S._kind(n) for n in S.schedules()]
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, (list, tuple)) or len(names) > 256:
        raise KaitenError("EINVAL", f"schedules {quote(names)}: expected a list of schedule names")
    kinds = []
    for n in names:
        k = S._optimal_kind() if n == S.OPTIMAL else S._kind(n)
        if k in kinds:
            raise KaitenError("EINVAL", f"schedules lists {quote(n)} twice ({quote(n)} is "
                                        f"{_name(k)})")
        kinds.append(k)
    if not kinds:
        raise KaitenError("EINVAL", "schedules is empty")
    return kinds


def _name(kind):
    return S.OPTIMAL if kind == S._optimal_kind() else S._kind_name(kind)


def _kind_v(kind, v):
    """The V a kind runs with in a comparison: v for the chunked loop kinds."""
    default = lib.kt_gen_default_chunks(kind)
    loop = S._placement_name(lib.kt_gen_kind_placement(kind)) != "v"
    return v if default > 1 and loop else default


def _takes_limit(kind):
    """optimal, zb-auto and zbv-auto keep to a memory limit; the others' orders set theirs."""
    return kind == S._optimal_kind() or lib.kt_gen_check_mem_limit(kind, 1.0, None) == 0


def _eval_kind(kind, p, m, v, costs, ml, time_limit, thorough=False):
    """The row's Schedule, or the reason it does not apply."""
    if not _takes_limit(kind):
        ml = (0.0, False)  # --mem-limit is for the rows that keep to one
    try:
        if kind == S._optimal_kind():
            sched, search, limit = S._optimal(p, m, 1, costs, ml, time_limit)
            return S.Schedule(sched, costs, kind, mem_limit=limit, search=search)
        sched, _, limit = S._generate(kind, p, m, _kind_v(kind, v), costs, ml, thorough)
    except KaitenError as e:
        return str(e)
    return S.Schedule(sched, costs, kind, mem_limit=limit)


def _simulated(sched):
    """sched with its simulation made, or the reason it failed."""
    try:
        sched._simulated()
    except KaitenError as e:
        return str(e)
    return sched


def _rows(entries, peak_1f1b, p, m, v, costs, table):
    """The library's rows of entries ((name, Schedule or reason)) as JSON or the table."""
    n = len(entries)
    ran = [(s._simulated() if isinstance(s, S.Schedule) else (None, None)) for _, s in entries]
    infos = (ctypes.c_void_p * n)(*[i.ptr if i else None for _, i in ran])
    sims = (ctypes.c_void_p * n)(*[x.ptr if x else None for x, _ in ran])
    names = (ctypes.c_char_p * n)(*[enc(name, "name") for name, _ in entries])
    reasons = (ctypes.c_char_p * n)(*[None if isinstance(s, S.Schedule) else enc(s)
                                      for _, s in entries])
    return _ffi.text_call(lib.kt_ffi_compare, n, infos, sims, names, reasons,
                          peak_1f1b if peak_1f1b else -1.0, p, m, v, enc(costs.basis),
                          costs.handle, 1 if table else 0, keep=ran)


def compare(stages=4, microbatches=8, schedules=None, costs=None, mem_limit=None, chunks=2,
            per_stage=False, schedule_file=None, time_limit=10, thorough=False):
    """Every schedule (or those named; "optimal" adds the exact search's
    order, V = 1, within time_limit seconds) side by side under one cost
    model, as `kaiten compare -p P -m M --format json` does: makespan,
    bubble, closed forms, peak memory (also as a fraction of 1F1B's on the
    same model), the lower bound and the gap to it, in-flight micro-batches
    and messages per row; rows that do not apply say why. chunks: V for
    interleaved and looped-bfs. schedule_file (a path or a Schedule from
    kaiten.load) adds one more row; P and M then come from it. thorough:
    zb-auto's and zbv-auto's thorough search (--thorough)."""
    file_sched = None
    if schedule_file is not None:
        file_sched = schedule_file if isinstance(schedule_file, S.Schedule) else \
            S.load(schedule_file, costs=costs, per_stage=per_stage)
        stages, microbatches = file_sched.p, file_sched.m
    S._check_size("stages", stages, 1, 4096)
    S._check_size("microbatches", microbatches, 1, 1000000)
    S._check_size("chunks", chunks, 2, 64)
    kinds = _kinds(schedules)
    # the CLI's guard, up front: every row's timeline is kept (for reports)
    actions = 3.0 * stages * chunks * microbatches
    e = _ffi.Err()
    if lib.kt_sim_memory_check(actions, _ffi.SIM_BYTES_TIMELINE * (len(kinds) + 1), e.ptr):
        raise KaitenError("EINVAL", f"compare stages={stages} microbatches={microbatches}: "
                                    f"{e.buf.value.decode(errors='replace')}")
    c = S.Costs(costs, per_stage)
    ml = S._parse_mem_limit(mem_limit)
    if mem_limit is not None and not any(_takes_limit(k) for k in kinds):
        raise KaitenError("EINVAL", f"mem_limit {quote(mem_limit)}: none of the schedules compared "
                                    "keeps to a memory limit (zb-auto, zbv-auto and optimal do)")
    p, m = stages, microbatches
    one = _simulated(_eval_kind(S._kind("1f1b"), p, m, chunks, c, ml, time_limit))
    peak_1f1b = one.simulate().peak_memory if isinstance(one, S.Schedule) else None
    entries = []
    for k in kinds:
        s = _eval_kind(k, p, m, chunks, c, ml, time_limit, thorough)
        entries.append((_name(k), _simulated(s) if isinstance(s, S.Schedule) else s))
    if file_sched is not None:
        fs = S.Schedule(file_sched._sched, c, -1, program=file_sched._program,
                        lowered=file_sched._lowered)
        entries.append((fs.name, _simulated(fs)))
    data = json.loads(_rows(entries, peak_1f1b, p, m, chunks, c, False))
    text = _rows(entries, peak_1f1b, p, m, chunks, c, True)
    return Comparison(data, dict(entries), c, text)
