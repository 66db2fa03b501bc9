"""Documents of varying length packed into micro-batches and the order the
pipeline runs them in (include/kaiten/packing.h, through kt_ffi_request_pack):
the same packing and order `kaiten sim --doc-lengths ... --packing` uses."""
from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Union

from . import _ffi
from ._ffi import lib
from ._request import Request


@dataclass(frozen=True)
class Packing:
    """micro_batches[k]: the indices of the documents (or the one given
    micro-batch) run k-th; tokens[k] their tokens; order[k]: the packed
    micro-batch run k-th; left_out: documents no micro-batch had room for;
    period: the simulated step of the order (0 when fifo keeps data order)."""

    packing: str
    micro_batches: List[List[int]]
    tokens: List[int]
    order: List[int]
    left_out: int
    period: float


def pack(schedule: str = "1f1b", stages: int = 4, documents: Optional[Sequence[int]] = None,
         lengths: Optional[Sequence[int]] = None, microbatches: Optional[int] = None,
         packing: str = "balanced", mb_tokens: int = 1024, attn_share: float = 0.25,
         costs: Optional[Mapping[str, Any]] = None, mem_limit: Union[None, float, str] = None,
         per_stage: bool = False, chunks: Optional[int] = None) -> Packing:
    """Packs documents (token lengths in data order) into `microbatches`
    micro-batches of at most `mb_tokens` tokens, or takes micro-batches
    already formed (`lengths`, one token count each), and returns the
    packing and the order in which `schedule` runs them ("balanced": the
    order with the shortest simulated step within `mem_limit`; "fifo": data
    order). costs are those of a micro-batch of one mb_tokens-long document
    (the cost-file format); attn_share the part of that time that grows with
    the square of a document's length."""
    if (documents is None) == (lengths is None):
        raise _ffi.error("EINVAL", "give documents or lengths (one of them)")
    given = lengths is not None
    values = [int(x) for x in (lengths if given else documents)]  # type: ignore[union-attr]
    m = microbatches if microbatches is not None else (len(values) if given else None)
    if m is None:
        raise _ffi.error("EINVAL", "microbatches: how many micro-batches the documents fill")
    r = Request().set("schedule", schedule).set("p", stages).set("m", m).set("v", chunks)
    r.costs(costs).set("mem_limit", mem_limit).set("packing", packing)
    r.set("mb_tokens", mb_tokens).set("attn_share", attn_share)
    if per_stage:
        r.set("per_stage", True)
    arr = (ctypes.c_int * max(len(values), 1))(*values)
    text = _ffi.text_call(lib.kt_ffi_request_pack, r.h.ptr, arr, None, len(values), int(given))
    d = json.loads(text)
    return Packing(d["packing"], d["micro_batches"], d["tokens"], d["order"], d["left_out"],
                   d["period"])
