"""`kaiten compare` in Python: every applicable schedule side by side under
one cost model. One request goes to the library, which runs each row and
renders the comparison as the CLI does."""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _ffi
from ._ffi import lib, dec, enc
from ._request import METRICS, TIMELINE, Request
from . import _schedule as S


@dataclass(frozen=True)
class CompareRow(S.JsonView):
    """One schedule of a comparison: its figures as fields, every key of
    the CLI's row by its name."""

    schedule: str
    applies: bool
    reason: Optional[str]       #: why it does not apply
    period: Optional[float]
    makespan: Optional[float]
    bubble: Optional[float]
    peak_memory: Optional[float]
    lower_bound: Optional[float]
    gap: Optional[float]
    data: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "CompareRow":
        return cls(d["schedule"], d["applies"], d.get("reason"), d.get("period"),
                   d.get("makespan"), d.get("bubble_ratio"), d.get("peak_memory"),
                   d.get("lower_bound"), d.get("gap"), d)


@dataclass(frozen=True)
class Comparison(S.JsonView):
    """`kaiten compare --format json`'s object (p, m, v, cost_basis, costs,
    lower_bound, rows[]), its rows as CompareRow, and each applicable row's
    Schedule."""

    p: int
    m: int
    v: int
    step_sync: str
    cost_basis: str
    lower_bound: Optional[float]
    rows: Tuple[CompareRow, ...]
    data: Dict[str, Any] = field(repr=False)
    _request: Request = field(repr=False, compare=False)
    _handle: _ffi.Handle = field(repr=False, compare=False)

    def row(self, name: str) -> CompareRow:
        for r in self.rows:
            if r.schedule == name:
                return r
        raise KeyError(name)

    def schedule(self, name: str) -> S.Schedule:
        """The Schedule of an applicable row."""
        h = self._handle
        for i in range(lib.kt_ffi_comparison_rows(h.ptr)):
            nm, why = ctypes.c_char_p(), ctypes.c_char_p()
            ptr = lib.kt_ffi_comparison_row(h.ptr, i, ctypes.byref(nm), ctypes.byref(why))
            if dec(nm.value) != name:
                continue
            if not ptr:
                raise KeyError(f"{name}: {dec(why.value)}")
            return S.Schedule(self._request, h, owner=self, ptr=ptr)
        raise KeyError(name)

    def best(self, key: str = "period") -> CompareRow:
        """The applicable row with the smallest key (the period by default)."""
        rows = [r for r in self.rows if r.applies]
        if not rows:
            raise _ffi.error("EINVAL", "no schedule applies")
        return min(rows, key=lambda r: r[key])

    def table(self) -> str:
        """The table `kaiten compare` prints (its default format)."""
        return _ffi.text_call(lib.kt_ffi_comparison_text, self._handle.ptr, 0)

    def report(self, path: Union[str, os.PathLike], title: Optional[str] = None) -> str:
        """Writes the HTML comparison report (`kaiten compare --report`)."""
        full = self._request.compare(TIMELINE)  # every row's events, once
        _ffi.call(lib.kt_ffi_comparison_report, full.ptr, enc(os.fspath(path)), enc(title))
        return os.fspath(path)


def compare(stages: Optional[int] = 4, microbatches: Optional[int] = 8,
            schedules: Union[None, str, Sequence[str]] = None,
            costs: Optional[Mapping[str, Any]] = None, mem_limit: Union[None, float, str] = None,
            chunks: Optional[int] = None, per_stage: bool = False,
            schedule_file: Union[None, str, os.PathLike, S.Schedule] = None,
            time_limit: float = 10, thorough: bool = False) -> Comparison:
    """Every schedule (or those named; "optimal" adds the exact search's
    order, V = 1, within time_limit seconds) side by side under one cost
    model, as `kaiten compare -p P -m M --format json` does: period,
    makespan, bubble, closed forms, peak memory (also as a fraction of
    1F1B's on the same model), the lower bound and the gap to it, in-flight
    micro-batches and messages per row; rows that do not apply say why.
    chunks: V for interleaved and looped-bfs (default 2). schedule_file (a
    path or a Schedule from kaiten.load) adds one more row; P and M then
    come from it. thorough: zb-auto's and zbv-auto's thorough search."""
    r = S._request(costs, per_stage, mem_limit=mem_limit, time_limit=time_limit,
                   thorough=thorough or None, chunks=chunks)
    if isinstance(schedules, (list, tuple)):
        schedules = ",".join(schedules)
    r.set("schedules", schedules)
    if schedule_file is not None:
        if isinstance(schedule_file, S.Schedule):
            raw, name = schedule_file._source or (schedule_file.to_text().encode(), "")
            r.order(raw, name or schedule_file.name)
        else:
            path = os.fsdecode(os.fspath(schedule_file))  # read as the CLI reads it: bounded
            r.order_file(path, os.path.basename(path).split(".", 1)[0])
    else:
        r.set("stages", stages).set("microbatches", microbatches)
    h = r.compare(METRICS)
    data = json.loads(_ffi.text_call(lib.kt_ffi_comparison_text, h.ptr, 1))
    rows = tuple(CompareRow.from_dict(x) for x in data["rows"])
    return Comparison(data["p"], data["m"], data["v"], data["step_sync"], data["cost_basis"],
                      data.get("lower_bound"), rows, data, r, h)
