"""One question for the library (include/kaiten/request.h): settings named
as the CLI's flags, each handed to the library as text, which reads and
checks it (and names it as it was given when it cannot)."""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Union

from . import _ffi
from ._ffi import lib, enc

#: the detail a result is built with (kt_result_detail)
ORDER, METRICS, TIMELINE = 0, 1, 2


def _text(value: Any) -> str:
    """A Python value as the setting's text: bools as JSON writes them (a
    flag reads true/false, a number refuses them), numbers as Python writes
    them (shortest round trip), lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


class Request:
    """A request: build this schedule (or this order), simulate it, say what it is."""

    def __init__(self) -> None:
        self.h = _ffi.Handle(lib.kt_ffi_request_new(), lib.kt_ffi_request_free)

    def set(self, key: str, value: Any) -> "Request":
        """One setting by the CLI's name ("p", "mem_limit", "tf"; the API's
        "stages", "microbatches", "chunks" too); None leaves it as it is."""
        if value is not None:
            _ffi.call(lib.kt_ffi_request_set, self.h.ptr, enc(key, "setting"),
                      enc(_text(value), str(key)))
        return self

    def costs(self, costs: Optional[Mapping[str, Any]]) -> "Request":
        """Costs in the cost file's format ({"tf": 1 or [..], "mem_act", ...})."""
        if costs:
            _ffi.call(lib.kt_ffi_request_costs, self.h.ptr, enc(json.dumps(dict(costs))))
        return self

    def order_file(self, path: str, name: Optional[str]) -> bytes:
        """The order in a file, read as `kaiten sim --schedule-file` reads it
        (bounded: kt_request_read_order); its text is returned."""
        _ffi.call(lib.kt_ffi_request_order_file, self.h.ptr, enc(path, "path"), enc(name, "name"))
        return lib.kt_ffi_request_order_text(self.h.ptr) or b""

    def order(self, text: Union[str, bytes], name: Optional[str]) -> "Request":
        """An order to run instead of generating one (kaiten text or CSV)."""
        raw = text if isinstance(text, bytes) else text.encode()
        _ffi.call(lib.kt_ffi_request_order, self.h.ptr, raw, len(raw), enc(name))
        return self

    def run(self, detail: int) -> _ffi.Handle:
        """The result (kt_ffi_run) as a handle."""
        return _ffi.handle_call(lib.kt_ffi_run, lib.kt_ffi_result_free, self.h.ptr, detail,
                                keep=self)

    def compare(self, detail: int) -> _ffi.Handle:
        """The comparison (kt_ffi_compare) as a handle; it reads this request's costs."""
        return _ffi.handle_call(lib.kt_ffi_compare, lib.kt_ffi_comparison_free, self.h.ptr,
                                detail, keep=self)

    def __str__(self) -> str:
        """Every setting that differs from the defaults, as key=value."""
        return _ffi.text_call(lib.kt_ffi_request_text, self.h.ptr)
