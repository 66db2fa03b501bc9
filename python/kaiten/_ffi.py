"""The C library through ctypes: loading it, its prototypes, its errors.

kaiten's flat interface (include/kaiten/ffi.h, libkaiten_ffi.so) gives
opaque handles for the library's structs; everything else here is the
library's own public functions called with those handles, plain numbers
and strings. No struct is laid out on this side.
"""
import ctypes
import ctypes.util
import math
import os
import queue
import threading

# Shared libraries in dependency order: each is loaded before what needs it,
# so the dynamic linker finds them by name wherever they were copied.
_LIBS = ("libkaiten_core.so", "libkaiten_io.so", "libkaiten_report.so", "libkaiten_ffi.so")
_ERROR_LEN = 512  # KT_ERROR_LEN

c_int, c_long, c_double, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_long, ctypes.c_double,
                                               ctypes.c_char_p, ctypes.c_void_p)
c_size_t = ctypes.c_size_t


class KaitenError(ValueError):
    """A call into kaiten failed: .status is the library's status name
    ("EINVAL", "EPARSE", "EINVALID_SCHEDULE", "EDEADLOCK", "ENOMEM", "EIO",
    ...), str() the one-line reason."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _search_dirs():
    """Where the shared libraries may be: $KAITEN_LIB_DIR (a build tree),
    then the package's own copy (an installed wheel)."""
    dirs = []
    env = os.environ.get("KAITEN_LIB_DIR")
    if env:
        dirs.append(env)
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native"))
    return dirs


def _load():
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


def _proto(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


P = c_void_p  # every handle and struct pointer
_PROTOTYPES = [
    # core
    ("kt_version", c_char_p),
    ("kt_status_name", c_char_p, c_int),
    ("kt_placement_name", c_char_p, c_int),
    ("kt_gen_kind_from_name", c_int, c_char_p),
    ("kt_gen_kind_name", c_char_p, c_int),
    ("kt_gen_kind_list", c_char_p),
    ("kt_gen_default_chunks", c_int, c_int),
    ("kt_gen_kind_placement", c_int, c_int),
    ("kt_costs_parse_json", c_int, P, c_char_p, c_char_p, P),
    ("kt_costs_for_chunks", c_int, P, c_int, P, P),
    ("kt_costs_compute_free", c_int, P),
    ("kt_schedule_validate", c_int, P, P),
    ("kt_lowered_validate_ir", c_int, P, c_int, P),
    ("kt_torch_ir_from_version", c_int, c_char_p, ctypes.POINTER(c_int), P),
    ("kt_schedule_lower_ir", c_int, P, c_int, P, P),
    ("kt_stage_rank", c_int, P, c_int),
    ("kt_schedule_messages", c_size_t, P),
    ("kt_schedule_total_actions", c_size_t, P),
    ("kt_recompute_from_name", c_int, c_char_p),
    ("kt_node_layout_from_name", c_int, c_char_p),
    ("kt_plan_preset_list", c_char_p),
    # ffi
    ("kt_ffi_free", None, P),
    ("kt_ffi_costs_new", P),
    ("kt_ffi_costs_free", None, P),
    ("kt_ffi_costs_json", c_int, P, ctypes.POINTER(P), P),
    ("kt_ffi_schedule_new", P),
    ("kt_ffi_schedule_free", None, P),
    ("kt_ffi_schedule_shape", None, P, ctypes.POINTER(c_int)),
    ("kt_ffi_schedule_name", c_char_p, P),
    ("kt_ffi_schedule_set_name", None, P, c_char_p),
    ("kt_ffi_generate", c_int, c_int, c_int, c_int, c_int, P, c_double, c_int, P, P),
    ("kt_ffi_1f1b_peak", c_double, c_int, c_int, c_int, c_int, P),
    ("kt_ffi_mem_limit", c_double, c_int, c_int, c_int, P, c_double),
    ("kt_ffi_parse", c_int, c_char_p, c_int, P, P, ctypes.POINTER(c_long), P),
    ("kt_ffi_parse_file", c_int, c_char_p, c_int, P, P, ctypes.POINTER(c_long), P),
    ("kt_sim_memory_check", c_int, c_double, c_double, P),
    ("kt_gen_check_mem_limit", c_int, c_int, c_double, P),
    ("kt_ffi_schedule_write", c_int, P, c_int, ctypes.POINTER(P), P),
    ("kt_ffi_simulate", c_int, P, P, ctypes.POINTER(P), P),
    ("kt_ffi_sim_free", None, P),
    ("kt_ffi_optimal", c_int, c_int, c_int, c_int, P, c_double, c_double, P, ctypes.POINTER(P), P),
    ("kt_ffi_search_free", None, P),
    ("kt_ffi_info_new", P, P, P, c_char_p, c_int, c_double, P, P),
    ("kt_ffi_info_free", None, P),
    ("kt_ffi_sim_json", c_int, P, P, c_int, ctypes.POINTER(P), P),
    ("kt_ffi_sim_gantt", c_int, P, P, c_int, ctypes.POINTER(P), P),
    ("kt_ffi_report", c_int, c_char_p, c_char_p, c_int, ctypes.POINTER(P), ctypes.POINTER(P),
     ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p), c_int, c_int, c_char_p, P, P),
    ("kt_ffi_compare", c_int, c_int, ctypes.POINTER(P), ctypes.POINTER(P), ctypes.POINTER(c_char_p),
     ctypes.POINTER(c_char_p), c_double, c_int, c_int, c_int, c_char_p, P, c_int, ctypes.POINTER(P),
     P),
    ("kt_ffi_partition", c_int, c_int, ctypes.POINTER(c_double), ctypes.POINTER(c_double),
     ctypes.POINTER(c_double), ctypes.POINTER(c_double), c_double, c_int, ctypes.POINTER(c_int),
     ctypes.POINTER(c_double), P),
    ("kt_ffi_plan_new", P),
    ("kt_ffi_plan_free", None, P),
    ("kt_ffi_plan_model", c_int, P, c_char_p, P),
    ("kt_ffi_plan_model_json", c_int, P, c_char_p, P),
    ("kt_ffi_plan_cluster_json", c_int, P, c_char_p, P),
    ("kt_ffi_plan_cluster_file", c_int, P, c_char_p, P),
    ("kt_ffi_plan_set", c_int, P, c_char_p, c_double, P),
    ("kt_ffi_plan_check", c_int, P, P),
    ("kt_ffi_plan_search", c_int, P, ctypes.POINTER(P), P),
    ("kt_ffi_plan_min_memory", c_double, P),
    ("kt_ffi_plan_not_applicable", c_char_p, P),
    ("kt_ffi_plan_partition", c_int, P, c_int, c_int, c_int, c_int, c_int, c_int, c_int,
     ctypes.POINTER(P), P),
]
for _p in _PROTOTYPES:
    _proto(*_p)


# KT_SIM_BYTES_TIMELINE (kaiten/sim.h): what a simulation with its timeline
# needs per action, for the size guard a comparison asks up front
SIM_BYTES_TIMELINE = 192.0


def quote(x, n=40):
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


def enc(text, what="text"):
    """text as the C library takes it (UTF-8 bytes); a NUL character, which
    would end the string early in C ("1f1b\\0zbv" read as "1f1b"), is
    refused."""
    if text is None:
        return None
    raw = text if isinstance(text, bytes) else str(text).encode()
    if b"\0" in raw:
        raise KaitenError("EINVAL", f"{what} {quote(text)}: a NUL character at position "
                                    f"{raw.index(bytes(1))}")
    return raw


def dec(raw):
    return None if raw is None else raw.decode()


def int_arg(what, value, lo, hi):
    """value as an int in lo..hi (a bool or float is not one): checked here,
    as ctypes would wrap an int past 2**31 silently."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise KaitenError("EINVAL", f"{what} {quote(value)}: expected an integer in {lo}..{hi}")
    return value


def num_arg(what, value, lo, hi):
    """value as a finite float in lo..hi."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if not ok or math.isnan(value) or not lo <= value <= hi:
        raise KaitenError("EINVAL", f"{what} {quote(value)}: expected a number in {lo:g}..{hi:g}")
    return float(value)


class Err:
    """A kt_error buffer; .check(status) raises KaitenError on failure."""

    def __init__(self):
        self.buf = ctypes.create_string_buffer(_ERROR_LEN)

    @property
    def ptr(self):
        return self.buf

    def check(self, status):
        if status != 0:
            raise KaitenError(dec(lib.kt_status_name(status)), self.buf.value.decode(errors="replace"))


def call(fn, *args):
    """fn(*args, err): raises KaitenError unless it returns 0."""
    e = Err()
    e.check(fn(*args, e.ptr))


class _Worker:
    """The one thread the library's long calls run on. This thread only
    waits for them, so Ctrl-C (KeyboardInterrupt) returns at once; the C
    call, bounded by its own limits, then ends on the worker. One thread
    for all of them, as the CLI's one: what the library keeps per thread
    (the exact search's last result, which the lower bound reuses) is
    found by the calls that follow."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.thread = None
        self.lock = threading.Lock()

    def _serve(self):
        while True:
            fn, args, done, box = self.jobs.get()
            try:
                box["result"] = fn(*args)
            except BaseException as x:  # noqa: BLE001 - handed to the caller
                box["error"] = x
            done.set()

    def run(self, fn, *args, keep=()):
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._serve, name="kaiten-calls", daemon=True)
                self.thread.start()
        done, box = threading.Event(), {"keep": keep}
        self.jobs.put((fn, args, done, box))
        while not done.wait(0.05):
            pass
        if "error" in box:
            raise box["error"]
        return box["result"]


_worker = _Worker()


def on_worker(fn, *args, keep=()):
    """fn(*args) on the library's worker thread (see _Worker). Pass handles
    (Handle objects), not their pointers, and in keep what arrays of
    pointers point to: the job keeps them alive until the call ends."""
    return _worker.run(fn, *args, keep=keep)


def long_call(fn, *args, keep=()):
    """call() for a call that may take seconds (a search, a simulation, a
    partition), run on the worker thread."""
    e = Err()
    e.check(on_worker(fn, *args, e.ptr, keep=keep))


def text_call(fn, *args, keep=()):
    """fn(*args, &out, err) for a text result: the text (freed on this side);
    run as long_call runs it."""
    out = c_void_p()
    long_call(fn, *args, ctypes.byref(out), keep=keep)
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        lib.kt_ffi_free(out)


class Handle:
    """An owned C object freed with its free function when collected."""

    def __init__(self, ptr, free):
        if not ptr:
            raise MemoryError("kaiten: out of memory")
        self.ptr = ptr
        self._free = free

    @property
    def _as_parameter_(self):
        """A Handle passes as its pointer (and a call's thread keeps it alive)."""
        return self.ptr

    def __del__(self):
        if getattr(self, "ptr", None):
            self._free(self.ptr)
            self.ptr = None


def costs_handle():
    return Handle(lib.kt_ffi_costs_new(), lib.kt_ffi_costs_free)


def schedule_handle():
    return Handle(lib.kt_ffi_schedule_new(), lib.kt_ffi_schedule_free)
