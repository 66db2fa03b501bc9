"""The Python package at the edges (issue 49): values whose sums overflow,
files without end, arguments out of range or of the wrong type, a call
interrupted with Ctrl-C, a 50 MB argument. Each case must end at once with
a KaitenError (one line, a short prefix of what it echoes) and leave the
interpreter alive: every case runs in an interpreter of its own, its
address space capped, so that a crash or a runaway allocation fails the
case and not the machine. Run by CTest with PYTHONPATH=python and
KAITEN_LIB_DIR=<build>.
"""
import os
import resource
import subprocess
import sys
import textwrap
import unittest

if os.environ.get("KT_SANITIZE"):
    print("test_python_edges: SKIP: sanitizer build")
    sys.exit(77)

LIMIT = 6 << 30  # address space of each case's interpreter


def cap():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run(code, timeout=30):
    """Runs code (after `import kaiten`) in a fresh interpreter: (exit code,
    stdout, stderr); exit code None when it ran past timeout."""
    src = "import kaiten\n" + textwrap.dedent(code)
    try:
        p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                           timeout=timeout, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        return None, "", "(timed out)"
    return p.returncode, p.stdout, p.stderr


def refused(call, *needles, timeout=30, seconds=None):
    """The code `call` raises KaitenError at once, one short line naming needles."""
    code = f"""
    import time
    t0 = time.monotonic()
    try:
        {call}
        print("RETURNED")
    except kaiten.KaitenError as e:
        print("ERROR", e.status, time.monotonic() - t0)
        print(str(e))
    """
    return code, needles, timeout, seconds


class Edges(unittest.TestCase):
    def check_refused(self, case):
        code, needles, timeout, seconds = case
        rc, out, err = run(code, timeout)
        self.assertEqual(rc, 0, f"{code.strip()}: exit {rc}: {err[-500:]}")
        lines = out.splitlines()
        self.assertTrue(lines and lines[0].startswith("ERROR "), f"{code.strip()}: {out[-300:]}")
        message = "\n".join(lines[1:])
        self.assertEqual(len(lines), 2, f"not one line: {message[:300]}")
        self.assertLess(len(message), 400, f"a long message: {message[:300]}...")
        for n in needles:
            self.assertIn(n, message)
        if seconds is not None:
            self.assertLess(float(lines[0].split()[2]), seconds, message)
        return message

    # 1. values whose sums overflow: a KaitenError, not a crash of the interpreter
    def test_overflowing_costs(self):
        for call in ('kaiten.schedule("1f1b", 2, 2, costs={"mem_act": 1e308}).simulate()',
                     'kaiten.schedule("zb-h1", 2, 2, costs={"mem_act": 9e307}).simulate()',
                     'kaiten.schedule("optimal", 2, 2, costs={"tf": 1e308, "tb": 1e308})',
                     'kaiten.compare(2, 2, costs={"tf": 1e308, "tb": 1e308, "tw": 1e308})',
                     'kaiten.schedule("1f1b", 2, 2, costs={"tf": 5e-324})'):
            with self.subTest(call=call):
                self.check_refused(refused(call, "expected 0 or a number in 1e-15..1e+15"))

    # 2. a schedule or cluster file without end: stopped at once, the cap named
    def test_unbounded_files(self):
        self.check_refused(refused('kaiten.load("/dev/zero")', "NUL byte", "MiB", seconds=5))
        self.check_refused(refused('kaiten.compare(schedule_file="/dev/zero")', "NUL byte",
                                   seconds=5))
        self.check_refused(refused('kaiten.plan("gpt2-124m", global_batch=8, cluster="/dev/zero")',
                                   "NUL byte", "MiB", seconds=5))

    # 3. the library trusts no caller: ranges and types checked before the call
    def test_arguments(self):
        self.check_refused(refused('kaiten.schedule("1f1b", 4, 8).gantt(width=10**9)', "width",
                                   "40..100000", seconds=2))
        self.check_refused(refused('kaiten.schedule("1f1b", 4, 8).gantt(width=2**31 + 120)',
                                   "width", seconds=2))
        self.check_refused(refused('kaiten.schedule("1f1b", 4, 8).gantt(width="wide")', "width"))
        self.check_refused(refused("kaiten.compare(stages=4096, microbatches=1000000)",
                                   "would need about", seconds=5))
        self.check_refused(refused('kaiten.schedule("1f1b\\0zbv", 2, 2)', "NUL character"))
        self.check_refused(refused('kaiten.load("0F0,0B0\\0junk")', "NUL byte"))
        self.check_refused(refused("kaiten.partition([1e308] * 4, 2)", "overflows"))
        self.check_refused(refused("kaiten.partition([1] * 2_000_000, 1000)", "cells of work",
                                   seconds=5))
        self.check_refused(refused('kaiten.partition(["a", "b"], 1)', "loads"))
        self.check_refused(refused("kaiten.schedule('1f1b', 2**40, 8)", "stages"))
        self.check_refused(refused("kaiten.schedule('1f1b', 4, 8, chunks=True)", "chunks"))

    def test_short_echo(self):
        msg = self.check_refused(refused('kaiten.schedule("x" * 50_000_000, 2, 2)',
                                         "unknown schedule", "...'"))
        self.assertLess(len(msg), 400)
        self.check_refused(refused('kaiten.schedule("zb-auto", 2, 4, mem_limit="9" * 10**6)',
                                   "mem_limit"))
        self.check_refused(refused('kaiten.plan("gpt2-124m", global_batch=8, schedules=["z" * 10**6])',
                                   "unknown value"))

    def test_interruptible(self):
        """Ctrl-C during a long call (a partition of 11 s here) returns at once."""
        code = """
        import os, random, signal, threading, time
        random.seed(1)
        n, S = 32767, 1024
        loads = [random.random() for _ in range(n)]
        mult = [float(S - j) for j in range(S)]
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            kaiten.partition(loads, S, fixed=[1.0] * n, act=[1.0] * n, mult=mult, mem_cap=1e9)
            print("RETURNED", time.monotonic() - t0)
        except KeyboardInterrupt:
            print("INTERRUPTED", time.monotonic() - t0)
        """
        rc, out, err = run(code, timeout=120)
        self.assertEqual(rc, 0, err[-500:])
        word, secs = out.split()[:2]
        self.assertEqual(word, "INTERRUPTED", out)
        self.assertLess(float(secs), 2.0, out)

    # 6. the memory limit's one rule, as the CLI's
    def test_mem_limit(self):
        for limit in ("0", "1e-300", "5e-324", 0):
            with self.subTest(limit=limit):
                self.check_refused(refused(f'kaiten.schedule("zb-auto", 2, 4, mem_limit={limit!r})',
                                           "expected a number above 0"))
        self.check_refused(refused('kaiten.schedule("1f1b", 2, 4, mem_limit=3)',
                                   "1f1b cannot keep to a memory limit"))
        self.check_refused(refused('kaiten.compare(2, 4, schedules="1f1b,gpipe", mem_limit=3)',
                                   "none of the schedules compared"))
        rc, out, err = run('print(kaiten.compare(2, 4, schedules="1f1b,zb-auto", mem_limit=2)'
                           '.row("1f1b")["applies"])')
        self.assertEqual((rc, out.strip()), (0, "True"), err[-300:])


if __name__ == "__main__":
    unittest.main(verbosity=1)
