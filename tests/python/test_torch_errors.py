"""kaiten.torch's errors under torch.distributed: a failure on one rank
reaches every rank as the same clear KaitenError, never as gloo's
"Connection closed by peer" or a hang. Two processes on gloo:
  - build_schedule(kind="zbv") on V=1 stages (rank 0 makes the order and
    fails): every rank raises KaitenError with rank 0's message;
  - costs with a wrong number of stages on rank 1 only (a local check):
    every rank raises, rank 0 naming rank 1.
Run with a Python that has torch (scripts/torch-oracle.sh's venv): skips
(77) without torch or under sanitizers."""
import json
import os
import socket
import sys
import tempfile
import time

if os.environ.get("KT_SANITIZE"):
    print("test_torch_errors: SKIP: an instrumented library does not load into python")
    sys.exit(77)
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("test_torch_errors: SKIP: needs torch (scripts/torch-oracle.sh install)")
    sys.exit(77)


def worker(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    import kaiten.torch as kt
    from kaiten import KaitenError
    from torch.distributed.pipelining import PipelineStage
    stage = PipelineStage(torch.nn.Linear(4, 4), rank, 2, torch.device("cpu"))
    loss = torch.nn.MSELoss()
    got = {}
    cases = {"zbv on V=1": dict(kind="zbv"),
             "rank 1's costs": dict(kind="1f1b", costs={"tf": [1.0] * (2 if rank == 0 else 3)})}
    for name, kw in cases.items():
        try:
            kt.build_schedule([stage], 4, loss, **kw)
            got[name] = "no error"
        except KaitenError as e:
            got[name] = "KaitenError %s: %s" % (e.status, e)
        except Exception as e:  # noqa: BLE001 -- what the test reports
            got[name] = "%s: %s" % (type(e).__name__, e)
        dist.barrier()
    with open("%s.%d" % (out, rank), "w") as f:
        json.dump(got, f)
    dist.destroy_process_group()


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = os.path.join(tempfile.mkdtemp(), "errors")
    ctx = mp.start_processes(worker, args=(port, out), nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + 90
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                raise TimeoutError("the ranks did not finish in 90 s (one waits for a peer)")
    except Exception as e:  # noqa: BLE001 -- a rank that died or hung is the failure
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
        print("FAIL: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        print("test_torch_errors: FAIL")
        return 1
    r0, r1 = (json.load(open("%s.%d" % (out, r))) for r in (0, 1))
    fails = 0
    for name in r0:
        a, b = r0[name], r1[name]
        print("%s: rank 0 %r, rank 1 %r" % (name, a[:160], b[:160]))
        ok = a.startswith("KaitenError EINVAL") and b.startswith("KaitenError EINVAL")
        if name == "zbv on V=1":
            ok = ok and a == b
        else:
            ok = ok and "rank 1" in a and "3 values for 2 stages" in b
        fails += not ok
    print("test_torch_errors: %d cases, %d failed: %s" % (len(r0), fails, "FAIL" if fails else "OK"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
