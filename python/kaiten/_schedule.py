"""Schedules and simulations: `kaiten sim` in Python, with the same names
and numbers. Every argument goes to the library as a setting of one
request (include/kaiten/request.h); the library builds, checks, simulates
and renders, as it does for the CLI."""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _ffi
from ._ffi import lib, dec, enc
from ._request import METRICS, ORDER, TIMELINE, Request

OPTIMAL = "optimal"  # the exact search: not a generator
_NOTATIONS = {"current": 1, "legacy": 2}


def schedules() -> List[str]:
    """Every schedule name kaiten generates, in the CLI's order."""
    return (dec(lib.kt_gen_kind_list()) or "").split(", ")


class JsonView(Mapping[str, Any]):
    """A result's every field by its JSON key (view["ranks"]), beside the
    dataclass fields that name the usual ones; `data` is the JSON object."""

    data: Dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class Simulation(JsonView):
    """One simulation: the usual figures as fields, and every field of
    `kaiten sim --format json` by its key (sim["ranks"], sim["events"])."""

    schedule: str
    p: int
    v: int
    m: int
    period: float        #: a step in steady state under step_sync
    makespan: float      #: one step alone: the last action's end less the first's start
    step_sync: str       #: "overlap" or "barrier": how a rank goes to its next step
    bubble: float        #: the bubble ratio of the period
    peak_memory: float   #: the largest peak over the ranks (mem-act units)
    lower_bound: Optional[float]  #: no order of this layout within its memory is faster
    gap: Optional[float]          #: period / lower_bound - 1
    data: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> "Simulation":
        d = json.loads(text)
        return cls(d["schedule"], d["p"], d["v"], d["m"], d["period"], d["makespan"],
                   d["step_sync"], d["bubble_ratio"], d["peak_memory"], d.get("lower_bound"),
                   d.get("gap"), d)

    @property
    def rank_peak_memory(self) -> List[float]:
        """Each rank's peak activation memory, rank 0 first."""
        return [r["peak_memory"] for r in self.data["ranks"]]


def _torch_ir(version: str) -> int:
    """kt_torch_ir of a torch release, as the library reads its version."""
    ir = ctypes.c_int()
    _ffi.call(lib.kt_torch_ir_from_version, enc(version), ctypes.byref(ir))
    return ir.value


class Schedule:
    """A pipeline schedule: per-rank action lists with its stage costs,
    made by kaiten.schedule() (a generator), kaiten.load() (a file) or a
    comparison's row."""

    def __init__(self, request: Request, result: _ffi.Handle, owner: Any = None,
                 ptr: Optional[int] = None) -> None:
        self._request = request  # what was asked (its costs as given)
        self._result = result    # the kt_result handle, or its owner's
        self._owner = owner      # a comparison that holds the result (kept alive)
        self._ptr: int = ptr if ptr is not None else (result.ptr or 0)
        self._source: Optional[Tuple[bytes, str]] = None  # a file's text and name (load)

    # ---- shape ----------------------------------------------------------------------
    def _order(self) -> int:
        return lib.kt_ffi_result_order(self._ptr)

    def _shape(self) -> List[int]:
        shape = (ctypes.c_int * 5)()
        lib.kt_ffi_schedule_shape(self._order(), shape)
        return list(shape)

    @property
    def name(self) -> str:
        return dec(lib.kt_ffi_schedule_name(self._order())) or ""

    @property
    def p(self) -> int:
        """Pipeline ranks."""
        return self._shape()[0]

    ranks = p

    @property
    def v(self) -> int:
        """Chunks (stages) per rank: the most any rank holds."""
        return self._shape()[1]

    @property
    def m(self) -> int:
        """Micro-batches per step."""
        return self._shape()[2]

    @property
    def n_stages(self) -> int:
        return self._shape()[3]

    @property
    def placement(self) -> str:
        """"loop", "v" or "explicit"."""
        return dec(lib.kt_placement_name(self._shape()[4])) or ""

    @property
    def stage_ranks(self) -> List[int]:
        """The rank of each stage."""
        return [lib.kt_stage_rank(self._order(), s) for s in range(self.n_stages)]

    @property
    def costs(self) -> Dict[str, Any]:
        """The stage costs the schedule runs with, as the CLI's JSON writes them."""
        return json.loads(_ffi.text_call(lib.kt_ffi_result_costs_json, self._ptr))

    @property
    def mem_limit(self) -> Optional[float]:
        """zb-auto, zbv-auto, optimal: the limit its order was searched
        under; a file: the limit given (mem-act units); else None."""
        x = lib.kt_ffi_result_mem_limit(self._ptr)
        return None if x < 0 else x

    def actions(self) -> List[List[str]]:
        """Each rank's actions in order, as text ("0F0", "3I2", ...)."""
        rows = self.to_csv().splitlines()
        return [[c for c in row.split(",") if c] for row in rows]

    def __repr__(self) -> str:
        return (f"<kaiten.Schedule {self.name} P={self.p} V={self.v} M={self.m} "
                f"placement={self.placement}>")

    # ---- checks and simulation ------------------------------------------------------
    def validate(self, torch_version: str = "2.15") -> bool:
        """Checks every (stage, micro-batch) runs one F and one complete
        backward on its rank in a valid order, without deadlock. (A file is
        checked when it is read, its sends and receives too.) Raises
        InvalidSchedule or Deadlock with the reason; returns True."""
        _ffi.call(lib.kt_schedule_validate, self._order())
        return True

    def _simulated(self, detail: int = TIMELINE) -> int:
        _ffi.call(lib.kt_ffi_result_simulate, self._ptr, detail, keep=self)
        return self._ptr

    def json(self, events: bool = True) -> str:
        """The simulation as `kaiten sim --format json` prints it, byte for
        byte (every action's event unless events is False)."""
        ptr = self._simulated(TIMELINE if events else METRICS)
        return _ffi.text_call(lib.kt_ffi_result_json, ptr, int(events), keep=self)

    def simulate(self, events: bool = False) -> Simulation:
        """Runs the schedule against its costs (event by event): `kaiten
        sim --format json`'s fields, and every action's event when events."""
        return Simulation.from_json(self.json(events))

    # ---- outputs --------------------------------------------------------------------
    def to_csv(self, format: str = "compute_only", path: Optional[str] = None,
               notation: str = "current", torch_version: str = "2.15") -> str:
        """PyTorch's CSV: "compute_only" (what _load_csv(format="compute_only")
        reads; `kaiten sim --format torch-csv`) or "compute_comms" (the
        lowered form with SEND/RECV, WAIT_SEND and REDUCE_GRAD for torch
        2.15's _PipelineScheduleRuntime; --format torch-csv-comms).
        notation "legacy" writes B as BW and I as B. Written to path when
        given; the text is returned."""
        if notation not in _NOTATIONS:
            raise _ffi.error("EINVAL", f"notation '{notation}': expected current or legacy")
        if format not in ("compute_only", "compute_comms"):
            raise _ffi.error("EINVAL", f"format '{format}': expected compute_only or compute_comms")
        ir = _torch_ir(torch_version)
        if format == "compute_only":
            ir = -1
        text = _ffi.text_call(lib.kt_ffi_schedule_write, self._order(), _NOTATIONS[notation], ir)
        if path is not None:
            _write(path, text)
        return text

    def to_text(self) -> str:
        """kaiten's text form (a header line, one line per rank)."""
        return _ffi.text_call(lib.kt_ffi_schedule_write, self._order(), -1, -1)

    def gantt(self, width: int = 120) -> str:
        """The terminal chart `kaiten sim` draws: a Gantt chart (one row per
        rank), the metrics table and the cost basis."""
        return _ffi.text_call(lib.kt_ffi_result_gantt, self._simulated(),
                              _ffi.cint("width", width), keep=self)

    def report(self, path: Union[str, os.PathLike], title: Optional[str] = None) -> str:
        """Writes the self-contained HTML report (`kaiten sim --report`):
        Gantt, memory over time, per-rank busy and idle, configuration."""
        _ffi.call(lib.kt_ffi_result_report, self._simulated(), self._request.h.ptr,
                  enc(os.fspath(path), "path"), enc(title, "title"), keep=self)
        return os.fspath(path)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _request(costs: Optional[Mapping[str, Any]], per_stage: bool, **settings: Any) -> Request:
    r = Request().costs(costs)
    for key, value in settings.items():
        r.set(key, value)
    return r.set("per_stage", per_stage or None)


def schedule(name: str, stages: int, microbatches: int, costs: Optional[Mapping[str, Any]] = None,
             mem_limit: Union[None, float, str] = None, placement: Optional[str] = None,
             chunks: Optional[int] = None, per_stage: bool = False, time_limit: float = 10,
             thorough: bool = False) -> Schedule:
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
    r = _request(costs, per_stage, schedule=name, stages=stages, microbatches=microbatches,
                 chunks=chunks, placement=placement, mem_limit=mem_limit, time_limit=time_limit,
                 thorough=thorough or None)
    return Schedule(r, r.run(ORDER))


def load(source: Union[str, bytes, os.PathLike], costs: Optional[Mapping[str, Any]] = None,
         per_stage: bool = False, notation: str = "auto", torch_version: str = "2.15",
         name: Optional[str] = None) -> Schedule:
    """Reads a schedule file (PyTorch CSV, compute-only or lowered, either
    notation; or kaiten's text form), as `kaiten sim --schedule-file` does,
    and validates it. source: a path, or the text itself when it holds a
    newline or a comma (and names no file)."""
    r = _request(costs, per_stage, torch_notation=notation, torch_version=torch_version)
    src = os.fspath(source) if isinstance(source, os.PathLike) else source
    if isinstance(source, os.PathLike) or (isinstance(src, str) and (
            os.path.exists(src) or ("\n" not in src and "," not in src))):
        path = src if isinstance(src, str) else os.fsdecode(src)
        label = name or os.path.basename(path).split(".", 1)[0]
        raw = r.order_file(path, label)  # read as the CLI reads it: bounded
    else:
        label = name
        raw = src if isinstance(src, bytes) else str(src).encode()
        r.order(raw, label)
    s = Schedule(r, r.run(ORDER))
    s._source = (raw, label or "")
    return s
