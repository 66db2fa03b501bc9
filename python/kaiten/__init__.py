"""kaiten: pipeline-parallel schedules, their simulator and the planner,
from Python (the C library through ctypes; the standard library only).

    import kaiten
    s = kaiten.schedule("zb-auto", stages=4, microbatches=8,
                        costs={"tf": 1, "tb": 1, "tw": 1}, mem_limit="1x")
    sim = s.simulate()            # makespan, bubble, per-rank peak memory
    s.to_csv("compute_comms")     # PyTorch's lowered CSV
    print(s.gantt())
    kaiten.compare(stages=4, microbatches=8).best()

The same names and numbers as the CLI (`kaiten sim|compare|plan --format
json`); docs/python.md documents the API. kaiten.torch (needs torch)
measures a model's stages and builds a PyTorch schedule from kaiten's order.
"""
from ._ffi import (KaitenError, InvalidArgument, InvalidSchedule, Deadlock, InfeasibleMemory,
                   KaitenMemoryError, KaitenOSError, lib as _lib)
from ._schedule import Schedule, Simulation, schedule, load, schedules
from ._compare import Comparison, CompareRow, compare
from ._plan import Plan, plan, partition
from ._packing import Packing, pack

__version__: str = _lib.kt_version().decode()

__all__ = ["KaitenError", "InvalidArgument", "InvalidSchedule", "Deadlock", "InfeasibleMemory",
           "KaitenMemoryError", "KaitenOSError", "Schedule", "Simulation", "Comparison",
           "CompareRow", "Plan", "schedule", "load", "schedules", "compare", "plan", "partition",
           "Packing", "pack", "__version__"]
