"""`kaiten plan` in Python, and the exact min-max partitioner."""
import ctypes
import json
import os

from . import _ffi
from ._ffi import error, lib, enc, dec, quote

RECOMPUTE = ("none", "selective", "full")
NODES = ("dp-inside", "pp-inside")


class Plan(dict):
    """`kaiten plan --format json`'s object: model, cluster, global_batch,
    search counts and configs[] (best first). nothing_fits says why no
    configuration fits (the CLI's exit-1 message), else None."""

    def __init__(self, data, nothing_fits=None):
        super().__init__(data)
        self.nothing_fits = nothing_fits

    @property
    def configs(self):
        return self.get("configs", [])

    @property
    def best(self):
        """The best configuration, or None when nothing fits."""
        return self.configs[0] if self.configs else None


def _int(what, value, lo, hi):
    return None if value is None else _ffi.int_arg(what, value, lo, hi)


def _num(what, value, lo, hi):
    return None if value is None else _ffi.num_arg(what, value, lo, hi)


def _mask(what, names, lookup, known):
    if names is None:
        return None
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, (list, tuple, set, frozenset)) or len(names) > 64:
        raise error("EINVAL", f"{what} {quote(names)}: expected a list of names")
    mask = 0
    for n in names:
        k = lookup(enc(n, what)) if isinstance(n, str) else -1
        if k < 0:
            raise error("EINVAL", f"{what}: unknown value {quote(n)} (known: {known})")
        mask |= 1 << k
    if not mask:
        raise error("EINVAL", f"{what}: empty list")
    return mask


def _json(value, what):
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise error("EINVAL", f"{what} {quote(value)}: {quote(str(e), 120)}") from None


class _Request:
    """A planner request in the library (kt_ffi_plan)."""

    def __init__(self):
        self.h = _ffi.Handle(lib.kt_ffi_plan_new(), lib.kt_ffi_plan_free)

    def set(self, field, value):
        if value is not None:
            _ffi.call(lib.kt_ffi_plan_set, self.h, enc(field, "field"), float(value))

    def model(self, model, seq_len):
        if isinstance(model, dict):
            _ffi.call(lib.kt_ffi_plan_model_json, self.h, enc(_json(model, "model"), "model"))
        elif model is None:
            raise error("EINVAL", "model is required (a preset: "
                                        f"{dec(lib.kt_plan_preset_list())}; a JSON file; or a dict)")
        elif isinstance(model, (str, os.PathLike)):
            _ffi.call(lib.kt_ffi_plan_model, self.h, enc(os.fspath(model), "model"))
        else:
            raise error("EINVAL", f"model {quote(model)}: expected a preset name, a JSON "
                                        "file or a dict")
        self.set("seq_len", _int("seq_len", seq_len, 1, 1 << 24))

    def cluster(self, cluster, devices, mem_gb, tflops, efficiency, devices_per_node):
        if isinstance(cluster, dict):
            _ffi.call(lib.kt_ffi_plan_cluster_json, self.h, enc(_json(cluster, "cluster"), "cluster"))
        elif isinstance(cluster, (str, os.PathLike)):  # read as the CLI reads --cluster (bounded)
            _ffi.call(lib.kt_ffi_plan_cluster_file, self.h, enc(os.fspath(cluster), "cluster"))
        elif cluster is not None:
            raise error("EINVAL", f"cluster {quote(cluster)}: expected a JSON file or a dict")
        self.set("devices", _int("devices", devices, 1, 4096 * 64))
        self.set("devices_per_node", _int("devices_per_node", devices_per_node, 1, 1 << 20))
        gb = _num("mem_gb", mem_gb, 1e-6, 1e9)
        self.set("mem_bytes", None if gb is None else gb * 1e9)
        t = _num("tflops", tflops, 1e-9, 1e9)
        self.set("peak_flops", None if t is None else t * 1e12)
        self.set("efficiency", _num("efficiency", efficiency, 1e-6, 1))
        if tflops is not None or efficiency is not None:
            self.set("achieved_flops", 0)  # the peak and efficiency given win over a measurement
        _ffi.call(lib.kt_ffi_plan_check, self.h)

    def options(self, zero, bytes_per_param, sequence_parallel):
        self.set("zero", _int("zero", zero, 0, 3))
        if bytes_per_param is not None:
            bpp = list(bytes_per_param) if isinstance(bytes_per_param, (list, tuple)) else []
            if len(bpp) != 3 or any(_num("bytes_per_param", x, 0, 64) is None for x in bpp):
                raise error("EINVAL", f"bytes_per_param {quote(bytes_per_param)}: expected "
                                            "three numbers W, G, O in 0..64 (e.g. (2, 2, 12))")
            for f, x in zip(("weight_bytes", "grad_bytes", "optimizer_bytes"), bpp):
                self.set(f, x)
        if sequence_parallel is not None:
            self.set("sequence_parallel", 1 if sequence_parallel else 0)


def plan(model, devices=None, mem_gb=None, global_batch=None, seq_len=None, cluster=None,
         pipeline=None, data_parallel=None, tensor_parallel=None, chunks=None, microbatches=None,
         micro_batch_size=None, grad_accum=None, schedules=None, recompute=None, nodes=None,
         zero=None, bytes_per_param=None, sequence_parallel=None, tflops=None, efficiency=None,
         devices_per_node=None, max_bubble=None, max_microbatches=1024, max_chunks=4, top=10,
         partition_only=False, stages=None):
    """Searches (P, D, t, V, M, b, K, schedule, recompute) for model on a
    cluster, as `kaiten plan --format json` does (keyword names are its
    options with underscores). model: a preset name, a JSON file or a
    model-spec dict; cluster: a JSON file or a dict. Returns a Plan.

    partition_only=True with stages=S: only the exact min-max cut of the
    layers into S stages (`kaiten plan --partition-only`), with
    tensor_parallel, micro_batch_size, microbatches, data_parallel and one
    recompute; mem_gb caps each stage's memory."""
    r = _Request()
    r.options(zero, bytes_per_param, sequence_parallel)
    r.cluster(cluster, devices, mem_gb, tflops, efficiency, devices_per_node)
    r.model(model, seq_len)
    if partition_only:
        return _partition_only(r, stages, tensor_parallel, micro_batch_size, microbatches,
                               data_parallel, recompute, mem_gb is not None)
    pins = {"p": pipeline, "d": data_parallel, "t": tensor_parallel, "v": chunks,
            "m": microbatches, "b": micro_batch_size, "k": grad_accum}
    for f, x in pins.items():
        r.set(f, _int(f"pin {f}", x, 1, 1000000 if f == "m" else 1 << 30))
    if global_batch is None:
        raise error("EINVAL", "global_batch is required (samples per optimizer step)")
    r.set("global_batch", _int("global_batch", global_batch, 1, 10 ** 12))
    r.set("top", _int("top", top, 0, 1000000))
    maxm = _int("max_microbatches", max_microbatches, 1, 1000000)
    maxv = _int("max_chunks", max_chunks, 2, 64)
    r.set("max_microbatches", max(maxm, microbatches or 0))
    r.set("max_chunks", max(maxv, chunks or 0))
    r.set("max_bubble", _num("max_bubble", max_bubble, 0, 1))
    r.set("collapse", 1)  # one row per distinct layout, as the CLI lists them
    r.set("schedules", _mask("schedule", schedules, lib.kt_gen_kind_from_name,
                             dec(lib.kt_gen_kind_list())))
    r.set("recomputes", _mask("recompute", recompute, lib.kt_recompute_from_name,
                              "none, selective, full"))
    r.set("node_layouts", _mask("nodes", nodes, lib.kt_node_layout_from_name,
                                "dp-inside, pp-inside"))
    data = json.loads(_ffi.text_call(lib.kt_ffi_plan_search, r.h, keep=r))
    return Plan(data, None if data["configs"] else _nothing_fits(r, data, max_bubble))


def _nothing_fits(r, data, max_bubble):
    """Why no configuration fits: the line `kaiten plan` prints."""
    s, c = data["search"], data["cluster"]
    if s["evaluated"] == 0 and s["pruned_memory"] == 0 and s["not_applicable"] > 0:
        return "no configuration applies: " + dec(lib.kt_ffi_plan_not_applicable(r.h))
    if s["over_bubble"] > 0 and s["over_bubble"] + s["no_fit"] >= s["evaluated"]:
        return (f"no configuration fits with bubble <= {100 * (max_bubble or 0):.1f}% "
                f"({s['over_bubble']} fit but exceed it)")
    budget = c["mem_bytes"] - c["mem_reserved"]
    return (f"no configuration fits in {budget / 1e9:.1f} GB per device: the smallest needs "
            f"{lib.kt_ffi_plan_min_memory(r.h) / 1e9:.1f} GB (try more devices, --zero 1..3, "
            "--recompute full or a smaller --micro-batch-size)")


def _partition_only(r, stages, t, b, m, d, recompute, capped):
    if stages is None:
        raise error("EINVAL", "partition_only needs stages S")
    _int("stages", stages, 1, 4096 * 64)
    rc = 0
    if recompute is not None:
        if not isinstance(recompute, str) or recompute not in RECOMPUTE:
            raise error("EINVAL", f"recompute {quote(recompute)}: expected none, selective "
                                        "or full")
        rc = RECOMPUTE.index(recompute)
    t, b, d = (_int(w, x, 1, 1 << 30) or 1 for w, x in
               (("tensor_parallel", t), ("micro_batch_size", b), ("data_parallel", d)))
    m = _int("microbatches", m, 1, 1000000) or stages
    text = _ffi.text_call(lib.kt_ffi_plan_partition, r.h, stages, t, b, m, d, rc,
                          1 if capped else 0)
    return Plan(json.loads(text))


def partition(loads, stages, fixed=None, act=None, mult=None, mem_cap=0.0):
    """The exact min-max contiguous cut of len(loads) weighted layers into
    stages non-empty stages (kt_partition_minmax): (counts, bottleneck),
    counts[j] layers in stage j, bottleneck the largest stage load. With
    mem_cap > 0 stage j must also hold sum(fixed) + mult[j] * sum(act) over
    its layers within mem_cap."""
    def numbers(what, x, k=None):
        if x is None:
            return None
        try:
            vals = [float(v) for v in x]
        except (TypeError, ValueError):
            raise error("EINVAL", f"partition: {what} {quote(x)}: expected a list of "
                                        "numbers") from None
        if isinstance(x, (str, bytes)) or any(isinstance(v, bool) for v in x):
            raise error("EINVAL", f"partition: {what} {quote(x)}: expected a list of numbers")
        if k is not None and len(vals) != k:
            raise error("EINVAL", f"partition: {len(vals)} values of {what} where {k} are "
                                        "needed")
        return (ctypes.c_double * len(vals))(*vals)

    load = numbers("loads", loads)
    n = _ffi.int_arg("layers (len(loads))", len(load), 1, (1 << 31) - 1)
    _ffi.int_arg("stages", stages, 1, n)
    arrays = (load, numbers("fixed", fixed, n), numbers("act", act, n),
              numbers("mult", mult, stages))
    cap = _ffi.num_arg("mem_cap", mem_cap, 0, 1e308)
    counts = (ctypes.c_int * stages)()
    bottleneck = ctypes.c_double()
    _ffi.call(lib.kt_ffi_partition, n, *arrays, cap, stages, counts, ctypes.byref(bottleneck),
              keep=arrays)
    return list(counts), bottleneck.value

