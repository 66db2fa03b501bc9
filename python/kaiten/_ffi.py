"""The C library through ctypes: loading it, its prototypes, its errors.

kaiten's flat interface (include/kaiten/ffi.h, libkaiten_ffi.so) gives
opaque handles for the library's structs; everything else here is the
library's own public functions called with those handles, plain numbers
and strings. No struct is laid out on this side, and no setting is
checked here: the library checks them and says what was wrong. Only what
C cannot see is refused on this side: a NUL character inside a string
(C would read "1f1b\\0zbv" as "1f1b") and an int past C's int (ctypes
would wrap it). Long calls run on one worker thread, so that Ctrl-C
returns at once.
"""
from __future__ import annotations

import ctypes
import os
import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

# Shared libraries in dependency order: each is loaded before what needs it,
# so the dynamic linker finds them by name wherever they were copied.
_LIBS = ("libkaiten_core.so", "libkaiten_io.so", "libkaiten_report.so", "libkaiten_ffi.so")
_ERROR_LEN = 512  # KT_ERROR_LEN


# ---- errors ------------------------------------------------------------------------

class KaitenError(Exception):
    """A call into kaiten failed: .status is the library's status name
    ("EINVAL", "EPARSE", "EINVALID_SCHEDULE", "EDEADLOCK", "EMEMLIMIT",
    "ENOMEM", "EIO", ...), str() the one-line reason, naming the value as
    it was given."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class InvalidArgument(KaitenError, ValueError):
    """A setting kaiten cannot take (EINVAL, EPARSE)."""


class InvalidSchedule(KaitenError, ValueError):
    """A schedule that is not one: a pair computed twice or never, on the
    wrong rank, in an impossible order (EINVALID_SCHEDULE)."""


class Deadlock(InvalidSchedule):
    """A schedule whose ranks wait for each other forever (EDEADLOCK)."""


class InfeasibleMemory(KaitenError, ValueError):
    """No order fits the memory limit (EMEMLIMIT); the message says the
    smallest limit that does."""


class KaitenMemoryError(KaitenError, MemoryError):
    """The library ran out of memory (ENOMEM)."""


class KaitenOSError(KaitenError, OSError):
    """Reading or writing a file failed (EIO)."""


_ERRORS: Dict[str, Type[KaitenError]] = {
    "EINVAL": InvalidArgument, "EPARSE": InvalidArgument,
    "EINVALID_SCHEDULE": InvalidSchedule, "EDEADLOCK": Deadlock,
    "EMEMLIMIT": InfeasibleMemory, "ENOMEM": KaitenMemoryError, "EIO": KaitenOSError,
}


def error(status: str, message: str) -> KaitenError:
    """The exception for a status name."""
    return _ERRORS.get(status, KaitenError)(status, message)


# ---- the library --------------------------------------------------------------------

def _search_dirs() -> List[str]:
    """Where the shared libraries may be: $KAITEN_LIB_DIR (a build tree),
    then the package's own copy (an installed wheel)."""
    dirs = []
    env = os.environ.get("KAITEN_LIB_DIR")
    if env:
        dirs.append(env)
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native"))
    return dirs


def _load() -> ctypes.CDLL:
    tried = []
    for d in _search_dirs():
        paths = [os.path.join(d, name) for name in _LIBS]
        if not all(os.path.exists(p) for p in paths):
            tried.append(d)
            continue
        handles = [ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL) for p in paths]
        return handles[-1]
    raise ImportError("kaiten: the C library (libkaiten_ffi.so and the layers it needs) is not in "
                      + " or ".join(tried) + ": install the package with `pip install ./python` "
                      "from the repository, or set KAITEN_LIB_DIR to a build directory "
                      "(`make build` puts them in build/)")


lib = _load()

c_int, c_long, c_double, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_long, ctypes.c_double,
                                               ctypes.c_char_p, ctypes.c_void_p)
c_size_t = ctypes.c_size_t
P = c_void_p  # every handle and struct pointer
OUT = ctypes.POINTER(c_void_p)  # a handle or text returned through a pointer
ERR = c_void_p  # a kt_error buffer

# Every C function the package calls, declared once: (name, result, arguments).
_PROTOTYPES: Sequence[Tuple[Any, ...]] = (
    # core
    ("kt_version", c_char_p),
    ("kt_status_name", c_char_p, c_int),
    ("kt_placement_name", c_char_p, c_int),
    ("kt_gen_kind_name", c_char_p, c_int),
    ("kt_gen_kind_list", c_char_p),
    ("kt_gen_kind_from_name", c_int, c_char_p),
    ("kt_stage_rank", c_int, P, c_int),
    ("kt_schedule_validate", c_int, P, ERR),
    ("kt_torch_ir_from_version", c_int, c_char_p, ctypes.POINTER(c_int), ERR),
    ("kt_recompute_from_name", c_int, c_char_p),
    ("kt_node_layout_from_name", c_int, c_char_p),
    ("kt_plan_preset_list", c_char_p),
    # requests, results, comparisons
    ("kt_ffi_free", None, P),
    ("kt_ffi_request_new", P),
    ("kt_ffi_request_free", None, P),
    ("kt_ffi_request_set", c_int, P, c_char_p, c_char_p, ERR),
    ("kt_ffi_request_costs", c_int, P, c_char_p, ERR),
    ("kt_ffi_request_order", c_int, P, c_char_p, c_size_t, c_char_p, ERR),
    ("kt_ffi_request_order_file", c_int, P, c_char_p, c_char_p, ERR),
    ("kt_ffi_request_order_text", c_char_p, P),
    ("kt_ffi_request_text", c_int, P, OUT, ERR),
    ("kt_ffi_request_pack", c_int, P, ctypes.POINTER(c_int), ctypes.POINTER(c_double), c_int,
     c_int, OUT, ERR),
    ("kt_ffi_run", c_int, P, c_int, OUT, ERR),
    ("kt_ffi_result_simulate", c_int, P, c_int, ERR),
    ("kt_ffi_result_free", None, P),
    ("kt_ffi_result_order", P, P),
    ("kt_ffi_result_program", P, P),
    ("kt_ffi_result_mem_limit", c_double, P),
    ("kt_ffi_result_read_info", c_char_p, P),
    ("kt_ffi_result_json", c_int, P, c_int, OUT, ERR),
    ("kt_ffi_result_gantt", c_int, P, c_int, OUT, ERR),
    ("kt_ffi_result_costs_json", c_int, P, OUT, ERR),
    ("kt_ffi_result_report", c_int, P, P, c_char_p, c_char_p, ERR),
    ("kt_ffi_compare", c_int, P, c_int, OUT, ERR),
    ("kt_ffi_comparison_free", None, P),
    ("kt_ffi_comparison_text", c_int, P, c_int, OUT, ERR),
    ("kt_ffi_comparison_rows", c_int, P),
    ("kt_ffi_comparison_row", P, P, c_int, ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p)),
    ("kt_ffi_comparison_report", c_int, P, c_char_p, c_char_p, ERR),
    ("kt_ffi_web_run", c_int, c_char_p, c_char_p, OUT, ERR),
    ("kt_ffi_schedule_shape", None, P, ctypes.POINTER(c_int)),
    ("kt_ffi_schedule_name", c_char_p, P),
    ("kt_ffi_schedule_write", c_int, P, c_int, c_int, OUT, ERR),
    # partitioner and planner
    ("kt_ffi_partition", c_int, c_int, ctypes.POINTER(c_double), ctypes.POINTER(c_double),
     ctypes.POINTER(c_double), ctypes.POINTER(c_double), c_double, c_int, ctypes.POINTER(c_int),
     ctypes.POINTER(c_double), ERR),
    ("kt_ffi_plan_new", P),
    ("kt_ffi_plan_free", None, P),
    ("kt_ffi_plan_model", c_int, P, c_char_p, ERR),
    ("kt_ffi_plan_model_json", c_int, P, c_char_p, ERR),
    ("kt_ffi_plan_cluster_json", c_int, P, c_char_p, ERR),
    ("kt_ffi_plan_cluster_file", c_int, P, c_char_p, ERR),
    ("kt_ffi_plan_set", c_int, P, c_char_p, c_double, ERR),
    ("kt_ffi_plan_check", c_int, P, ERR),
    ("kt_ffi_plan_search", c_int, P, OUT, ERR),
    ("kt_ffi_plan_min_memory", c_double, P),
    ("kt_ffi_plan_not_applicable", c_char_p, P),
    ("kt_ffi_plan_partition", c_int, P, c_int, c_int, c_int, c_int, c_int, c_int, c_int, OUT, ERR),
)

for _name, _res, *_args in _PROTOTYPES:
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = list(_args)


def quote(x: Any, n: int = 40) -> str:
    """x as an error message shows it: a short prefix of its repr (a 50 MB
    argument is not echoed whole)."""
    if isinstance(x, (str, bytes)) and len(x) > n:
        return f"{x[:n]!r}... ({len(x)} characters)"
    if isinstance(x, (list, tuple, dict, set, frozenset)) and len(x) > 8:
        return f"<{type(x).__name__} of {len(x)} items>"
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - any object may be handed in
        text = f"<{type(x).__name__}>"
    return text if len(text) <= n else text[:n] + "..."


def enc(text: Any, what: str = "text") -> Optional[bytes]:
    """text as the C library takes it (UTF-8 bytes); a NUL character, which
    would end the string early in C, is refused."""
    if text is None:
        return None
    raw = text if isinstance(text, bytes) else str(text).encode()
    if b"\0" in raw:
        raise error("EINVAL", f"{what} {quote(text)}: a NUL character at position "
                              f"{raw.index(bytes(1))}")
    return raw


def cint(what: str, value: Any) -> int:
    """value as a C int: an int (not a bool) that fits, else EINVAL (ctypes
    would wrap 2**32 + 100 to 100 silently). Its range is the library's to
    check."""
    if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
        raise error("EINVAL", f"{what} {quote(value)}: expected an integer in "
                              f"{-2**31}..{2**31 - 1}")
    return value


def int_arg(what: str, value: Any, lo: int, hi: int) -> int:
    """value as an int in lo..hi (a bool or float is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise error("EINVAL", f"{what} {quote(value)}: expected an integer in {lo}..{hi}")
    return value


def num_arg(what: str, value: Any, lo: float, hi: float) -> float:
    """value as a finite float in lo..hi."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if not ok or value != value or not lo <= value <= hi:
        raise error("EINVAL", f"{what} {quote(value)}: expected a number in {lo:g}..{hi:g}")
    return float(value)


def dec(raw: Optional[bytes]) -> Optional[str]:
    return None if raw is None else raw.decode()


class Err:
    """A kt_error buffer; .check(status) raises the status's exception."""

    def __init__(self) -> None:
        self.buf = ctypes.create_string_buffer(_ERROR_LEN)

    @property
    def ptr(self) -> Any:
        return self.buf

    def check(self, status: int) -> None:
        if status != 0:
            raise error(dec(lib.kt_status_name(status)) or "?",
                        self.buf.value.decode(errors="replace"))


class _Worker:
    """The one thread the library's long calls run on (a search, a
    simulation, a comparison, a partition). The calling thread only waits
    for them, so Ctrl-C (KeyboardInterrupt) returns at once; the C call,
    bounded by its own limits, then ends on the worker, holding what it
    was handed (keep) until it does."""

    def __init__(self) -> None:
        self.jobs: "queue.SimpleQueue[Tuple[Any, ...]]" = queue.SimpleQueue()
        self.thread: Optional[threading.Thread] = None
        self.lock = threading.Lock()

    def _serve(self) -> None:
        while True:
            fn, args, done, box = self.jobs.get()
            try:
                box["result"] = fn(*args)
            except BaseException as x:  # noqa: BLE001 - handed to the caller
                box["error"] = x
            done.set()

    def run(self, fn: Callable[..., Any], args: Tuple[Any, ...], keep: Any) -> Any:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._serve, name="kaiten-calls",
                                               daemon=True)
                self.thread.start()
        done, box = threading.Event(), {"keep": keep}
        self.jobs.put((fn, args, done, box))
        while not done.wait(0.05):
            pass
        if "error" in box:
            raise box["error"]
        return box["result"]


_worker = _Worker()


def _invoke(fn: Callable[..., Any], args: Tuple[Any, ...], keep: Any) -> Any:
    """fn(*args), on the worker thread when keep is given (what the call
    uses that must outlive an interrupted wait: the handles' owners)."""
    return fn(*args) if keep is None else _worker.run(fn, args, keep)


def call(fn: Callable[..., int], *args: Any, keep: Any = None) -> None:
    """fn(*args, err): raises unless it returns 0."""
    e = Err()
    e.check(_invoke(fn, (*args, e.ptr), keep))


def text_call(fn: Callable[..., int], *args: Any, keep: Any = None) -> str:
    """fn(*args, &out, err) for a text result: the text (freed on this side)."""
    out = c_void_p()
    e = Err()
    e.check(_invoke(fn, (*args, ctypes.byref(out), e.ptr), keep))
    try:
        return ctypes.string_at(out.value or 0).decode() if out.value else ""
    finally:
        lib.kt_ffi_free(out)


def handle_call(fn: Callable[..., int], free: Callable[[Any], None], *args: Any,
                keep: Any = None) -> "Handle":
    """fn(*args, &out, err) for a new handle: the handle, freed with free."""
    out = c_void_p()
    e = Err()
    e.check(_invoke(fn, (*args, ctypes.byref(out), e.ptr), keep))
    return Handle(out.value, free)


class Handle:
    """An owned C object freed with its free function when collected."""

    def __init__(self, ptr: Optional[int], free: Callable[[Any], None]) -> None:
        if not ptr:
            raise KaitenMemoryError("ENOMEM", "kaiten: out of memory")
        self.ptr: Optional[int] = ptr
        self._free = free

    @property
    def _as_parameter_(self) -> Optional[int]:
        """A Handle passes as its pointer (and a call's job keeps it alive)."""
        return self.ptr

    def __del__(self) -> None:
        if getattr(self, "ptr", None):
            self._free(self.ptr)
            self.ptr = None
