"""The Python package against the CLI: the same names and numbers.

kaiten.schedule / load / compare / plan / partition over the shared library
(ctypes) must give exactly what `kaiten sim|compare|plan --format json`
prints for the same arguments, on a grid of schedules, sizes and costs;
the CSV exports and the terminal chart byte for byte. Errors come back as
KaitenError with the CLI's reason. Run by CTest with PYTHONPATH=python,
KAITEN_LIB_DIR=<build> and KT_CLI=<build>/kaiten.
"""
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

if os.environ.get("KT_SANITIZE"):
    # an instrumented library cannot load into an uninstrumented python
    print("test_python_api: SKIP: sanitizer build")
    sys.exit(77)

import kaiten  # noqa: E402

CLI = os.environ["KT_CLI"]
DATA = os.environ.get("KT_TEST_DATA", "")


def cli(*args, ok=True):
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    if ok and p.returncode:
        raise AssertionError(f"kaiten {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
    return p


def cli_json(*args):
    return json.loads(cli(*args).stdout)


def read(path):
    with open(path) as f:
        return f.read()


def cost_flags(costs, per_stage=False):
    flags = []
    for k, v in (costs or {}).items():
        text = ",".join(map(repr, v)) if isinstance(v, list) else v if isinstance(v, str) else repr(v)
        flags += [f"--{k.replace('_', '-')}", text]
    return flags + (["--per-stage"] if per_stage else [])


def sizes(ps=(2, 3, 4)):
    for p in ps:
        for m in (p, 2 * p, 3 * p + 1):
            yield p, m


UNIFORM = [None, {"tf": 1, "tb": 1.2, "tw": 0.7, "mem_wgrad": 0.5},
           {"tf": 2, "tb": 2, "tw": 1, "comm": 0.25}]


class SimAgainstCli(unittest.TestCase):
    def check_sim(self, name, p, m, costs=None, mem_limit=None, chunks=None, per_stage=False,
                  every_format=True, thorough=False):
        args = ["sim", "--schedule", name, "-p", p, "-m", m] + cost_flags(costs, per_stage)
        if thorough:
            args += ["--thorough"]
        if mem_limit is not None:
            args += ["--mem-limit", mem_limit]
        if chunks:
            args += ["-v", chunks]
        label = " ".join(map(str, args))
        ref = cli(*args, "--format", "json", ok=False)
        try:
            s = kaiten.schedule(name, p, m, costs=costs, mem_limit=mem_limit, chunks=chunks,
                                per_stage=per_stage, thorough=thorough)
        except kaiten.KaitenError as e:
            self.assertNotEqual(ref.returncode, 0, f"{label}: python refused ({e}), the CLI did not")
            self.assertIn(str(e), ref.stderr, label)
            return 0
        self.assertEqual(ref.returncode, 0, f"{label}: the CLI refused ({ref.stderr}), python did not")
        self.assertEqual(s.simulate(events=True).data, json.loads(ref.stdout), label)
        self.assertEqual(s.to_csv("compute_comms"), cli(*args, "--format", "torch-csv-comms").stdout,
                         label)
        self.assertTrue(s.validate())
        if not every_format:
            return 1
        self.assertEqual(s.to_csv(), cli(*args, "--format", "torch-csv").stdout, label)
        self.assertEqual(s.to_csv(notation="legacy"),
                         cli(*args, "--format", "torch-csv", "--torch-notation", "legacy").stdout)
        self.assertEqual(s.to_text(), cli(*args, "--format", "text").stdout, label)
        self.assertEqual(s.gantt(width=100),
                         cli(*args, "--format", "ascii", "--width", 100, "--color", "never").stdout,
                         label)
        return 1

    def test_grid(self):
        """Every schedule at P in {2,3,4}, M in {P, 2P, 3P+1} under three cost models."""
        ran = 0
        for name in kaiten.schedules():
            for (p, m), costs in itertools.product(sizes(), UNIFORM):
                # the events pin the order; the other formats once per schedule and costs
                ran += self.check_sim(name, p, m, costs, every_format=(p, m) == (4, 8))
        self.assertGreater(ran, 250)  # most of the 351 cases apply

    def test_per_stage_and_limits(self):
        """Per-stage costs, the rank and the stage basis, memory limits, chunks."""
        ran = 0
        for name in kaiten.schedules():
            s = 8  # P=4 with two chunks, or eight ranks' worth with one
            v = 2 if name in ("interleaved", "looped-bfs", "interleaved-zb", "zbv", "dualpipev",
                              "zbv-auto", "v-half", "v-min") else 1
            costs = {"tf": [1 + 0.25 * i for i in range(4 * v)], "tb": 1.5, "tw": 0.5,
                     "mem_act": [2] * (4 * v), "mem_wgrad": 0.5}
            ran += self.check_sim(name, 4, 9, costs)
            ran += self.check_sim(name, 4, s, {"tf": 3, "tb": 3, "tw": 2, "mem_act": 4},
                                  per_stage=True)
        for limit in ("0.5x", "1x", 3, 6):
            ran += self.check_sim("zb-auto", 4, 12, {"tw": 0.5}, mem_limit=limit)
            ran += self.check_sim("zbv-auto", 4, 12, {"tw": 0.5}, mem_limit=limit)
        ran += self.check_sim("zb-auto", 4, 8, None, chunks=2)
        for name in ("zb-auto", "zbv-auto"):  # the thorough search: the CLI's order too
            costs = {"tf": 1, "tb": 1.2, "tw": 0.7, "comm": 0.05, "mem_act": 2, "mem_wgrad": 1}
            ran += self.check_sim(name, 4, 12, costs, mem_limit=16, thorough=True,
                                  every_format=False)
            fast = kaiten.schedule(name, 4, 12, costs=costs, mem_limit=16).simulate()
            slow = kaiten.schedule(name, 4, 12, costs=costs, mem_limit=16,
                                   thorough=True).simulate()
            self.assertLessEqual(slow["period"], fast["period"] + 1e-9, name)
        ran += self.check_sim("interleaved", 4, 8, None, chunks=3)
        for name in ("1f1b", "zb-h1", "zb-auto", "zbv"):  # overheads: no closed form
            ran += self.check_sim(name, 4, 8, {"op_overhead": 0.1, "send_overhead": 0.05})
        self.assertGreater(ran, 34)

    def test_optimal(self):
        """The exact search's schedule: the CLI's order, bound and search
        figures (all but the seconds it took), in both placements."""
        for p, m, costs, limit, placement in ((3, 5, {"tw": 0.5}, None, None),
                                              (2, 4, {"tf": [1, 2, 1, 1], "tw": 0.5}, None, "v"),
                                              (3, 4, {"mem_wgrad": 0.5}, "0.75x", None)):
            s = kaiten.schedule("optimal", p, m, costs=costs, mem_limit=limit, placement=placement)
            args = ["sim", "--schedule", "optimal", "-p", p, "-m", m] + cost_flags(costs)
            args += (["--mem-limit", limit] if limit else []) + (["-v", 2] if placement else [])
            got, ref = s.simulate(events=True), cli_json(*args, "--format", "json")
            for d in (got.data, ref):
                d["search"].pop("seconds")
            self.assertEqual(got.data, ref, args)
            self.assertTrue(got["proven"])
            self.assertEqual(got.lower_bound, got.period)
            self.assertEqual(s.to_csv(), cli(*args, "--format", "torch-csv").stdout)
            self.assertEqual(s.name, "optimal")
            self.assertLessEqual(s.simulate().period,
                                 kaiten.schedule("zb-auto", p, m, costs=costs, mem_limit=limit,
                                                 placement=placement).simulate().period)
        ref = cli("sim", "--schedule", "optimal", "-p", 3, "-m", 100, ok=False)
        with self.assertRaises(kaiten.KaitenError) as e:
            kaiten.schedule("optimal", 3, 100)
        self.assertEqual(ref.stderr.strip(), f"kaiten: {e.exception}")
        with self.assertRaises(kaiten.KaitenError):
            kaiten.schedule("optimal", 3, 5, time_limit=0)

    def test_placement(self):
        """placement "v" turns zb-auto into zbv-auto; others must match."""
        a = kaiten.schedule("zb-auto", 4, 8, placement="v")
        self.assertEqual((a.name, a.placement, a.v), ("zbv-auto", "v", 2))
        self.assertEqual(a.simulate(), kaiten.schedule("zbv-auto", 4, 8).simulate())
        self.assertEqual(kaiten.schedule("zbv-auto", 4, 8, placement="loop").name, "zb-auto")
        with self.assertRaises(kaiten.KaitenError) as e:
            kaiten.schedule("1f1b", 4, 8, placement="v")
        self.assertIn("zbv", str(e.exception))
        self.assertEqual(kaiten.schedule("zbv", 2, 4).stage_ranks, [0, 1, 1, 0])

    def test_files(self):
        """Schedule files (PyTorch's CSV, both notations, lowered) as sim --schedule-file."""
        files = sorted(f for f in os.listdir(DATA) if f.endswith(".csv"))
        self.assertTrue(files, DATA)
        with tempfile.TemporaryDirectory() as d:
            lowered = os.path.join(d, "zbv_comms.csv")
            cli("sim", "--schedule", "zbv", "-p", 4, "-m", 8, "--format", "torch-csv-comms", "-o",
                lowered)
            paths = [os.path.join(DATA, f) for f in files] + [lowered]
            for path, costs in itertools.product(paths, UNIFORM[:2]):
                args = ["sim", "--schedule-file", path] + cost_flags(costs)
                s = kaiten.load(path, costs=costs)
                self.assertEqual(s.simulate(events=True).data, cli_json(*args, "--format", "json"),
                                 path)
                self.assertEqual(s.to_csv(), cli(*args, "--format", "torch-csv").stdout, path)
            with open(lowered) as f:
                text = f.read()
            self.assertEqual(kaiten.load(text, name="zbv_comms").simulate(),
                             kaiten.load(lowered).simulate())

    def test_bad_schedules(self):
        """Invalid and deadlocking files are refused with the validator's reason."""
        cases = {"0F0,0B0\n1F0\n": "EINVALID_SCHEDULE",        # stage 1 never runs its backward
                 "0F0,0B0,1B0\n1F0,1F1\n": "EINVALID_SCHEDULE",
                 "0F0,0F1,0B1,0B0\n1F0,1B0,1F1,1B1\n": None}  # valid: any backward order
        for text, status in cases.items():
            if status is None:
                self.assertTrue(kaiten.load(text).validate())
                continue
            with self.assertRaises(kaiten.KaitenError) as e:
                kaiten.load(text)
            self.assertEqual(e.exception.status, status, text)
        deadlock = "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n"
        with self.assertRaises(kaiten.KaitenError) as e:
            kaiten.load(deadlock)
        self.assertIn(e.exception.status, ("EDEADLOCK", "EINVALID_SCHEDULE"))
        with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
            f.write(deadlock)
            f.flush()
            ref = cli("validate", f.name, ok=False)
        self.assertEqual(ref.returncode, 2)
        self.assertIn(str(e.exception), ref.stderr)

    def test_errors(self):
        """Bad arguments: KaitenError naming the value, never a crash."""
        bad = [lambda: kaiten.schedule("nope", 4, 8),
               lambda: kaiten.schedule("1f1b", 0, 8),
               lambda: kaiten.schedule("1f1b", 4, 8, costs={"tff": 1}),
               lambda: kaiten.schedule("1f1b", 4, 8, costs={"tf": -1}),
               lambda: kaiten.schedule("1f1b", 4, 8, costs={"tf": float("nan")}),
               lambda: kaiten.schedule("1f1b", 4, 8, costs={"tf": 0, "tb": 0, "tw": 0}),
               lambda: kaiten.schedule("1f1b", 4, 8, costs={"tf": [1, 2]}).simulate(),
               lambda: kaiten.schedule("zb-auto", 4, 8, mem_limit="-1x"),
               lambda: kaiten.schedule("zb-auto", 4, 8, mem_limit="lots"),
               lambda: kaiten.schedule("zbv", 4, 4),
               lambda: kaiten.schedule("1f1b", 4, 8).to_csv("nope"),
               lambda: kaiten.schedule("1f1b", 4, 8).to_csv(torch_version="banana"),
               lambda: kaiten.load("0X0,0F0\n"),
               lambda: kaiten.load("/no/such/schedule.csv"),
               lambda: kaiten.load(CLI),  # a binary file
               lambda: kaiten.compare(4, 8, schedules="1f1b,1f1b"),
               lambda: kaiten.plan("no-such-model", global_batch=8),
               lambda: kaiten.plan("gpt2-124m"),
               lambda: kaiten.partition([1, 2], 3)]
        for i, fn in enumerate(bad):
            with self.assertRaises(kaiten.KaitenError, msg=f"case {i}") as e:
                fn()
            self.assertTrue(str(e.exception) and "\n" not in str(e.exception), f"case {i}")
        ref = cli("sim", "--schedule", "zbv", "-p", 4, "-m", 4, ok=False)
        with self.assertRaises(kaiten.KaitenError) as e:
            kaiten.schedule("zbv", 4, 4)
        self.assertEqual(ref.stderr.strip(), f"kaiten: {e.exception}")

    def test_report(self):
        with tempfile.TemporaryDirectory() as d:
            s = kaiten.schedule("zb-h1", 4, 8)
            path = s.report(os.path.join(d, "r.html"))
            html = read(path)
            ref = os.path.join(d, "ref.html")
            cli("sim", "--schedule", "zb-h1", "-p", 4, "-m", 8, "--report", ref)
            self.assertEqual(html, read(ref))
            c = kaiten.compare(4, 8, schedules=["1f1b", "zbv", "zb-auto"])
            c.report(os.path.join(d, "c.html"))
            cli("compare", "-p", 4, "-m", 8, "--schedules", "1f1b,zbv,zb-auto", "--report", ref)
            self.assertEqual(read(os.path.join(d, "c.html")), read(ref))
            c = kaiten.compare(2, 2)  # rows that do not apply are listed in the report too
            c.report(os.path.join(d, "c2.html"))
            cli("compare", "-p", 2, "-m", 2, "--report", ref)
            self.assertEqual(read(os.path.join(d, "c2.html")), read(ref))


class Doors(unittest.TestCase):
    """One request through the CLI and through Python: the same bytes, and
    the same reason when it is refused, in the exception its status names."""

    def test_bytes(self):
        limits = (None, "0.75x", 3)
        costs = (None, {"tf": 1, "tb": 1.2, "tw": 0.7, "mem_wgrad": 0.5, "step_sync": "barrier"},
                 {"tf": [1, 2, 1, 2], "tw": 0.5, "tu": 0.25, "t_norm": 0.1})
        ran = refused = 0
        for name, c, limit in itertools.product(("1f1b", "zb-h2", "zb-auto", "zbv-auto", "optimal"),
                                                costs, limits):
            m = 5 if name == "optimal" else 8
            if name == "zbv-auto" and c and isinstance(c.get("tf"), list):
                continue  # 4 stage costs for 8 stages
            args = ["sim", "--schedule", name, "-p", 4, "-m", m] + cost_flags(c)
            args += ["--mem-limit", limit] if limit is not None else []
            ref = cli(*args, "--format", "json", ok=False)
            try:
                got = kaiten.schedule(name, 4, m, costs=c, mem_limit=limit).json()
            except kaiten.KaitenError as e:
                self.assertNotEqual(ref.returncode, 0, args)
                self.assertIn(str(e), ref.stderr, args)
                refused += 1
                continue
            if name == "optimal":  # the search's seconds differ run by run
                got = re.sub(r'"seconds":[0-9.e+-]+', '"seconds":0', got)
                ref = subprocess.CompletedProcess(ref.args, ref.returncode,
                                                  re.sub(r'"seconds":[0-9.e+-]+', '"seconds":0',
                                                         ref.stdout), ref.stderr)
            self.assertEqual(got, ref.stdout, args)
            ran += 1
        # 1f1b and zb-h2 keep to no memory limit: refused alike with one given
        self.assertGreater(ran, 24)
        self.assertGreaterEqual(refused, 12)

    def test_exceptions(self):
        with self.assertRaises(kaiten.InfeasibleMemory) as e:
            kaiten.schedule("zb-auto", 4, 8, mem_limit="0.1x")
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("mem-limit 0.1x", str(e.exception))
        self.assertIn("the smallest fraction that works is 0.25x", str(e.exception))
        self.assertEqual(kaiten.schedule("zb-auto", 4, 8, mem_limit="0.25x").mem_limit, 1)
        with self.assertRaises(kaiten.InvalidArgument) as e:
            kaiten.schedule("1f1b", True, 8)
        self.assertIn("stages 'true'", str(e.exception))
        with self.assertRaises(kaiten.InvalidArgument) as e:
            kaiten.schedule("zb-auto", 4, 8, mem_limit="lots")
        self.assertIn("mem_limit 'lots'", str(e.exception))
        with self.assertRaises(kaiten.InvalidSchedule):
            kaiten.load("0F0,0B0\n1F0\n")
        with self.assertRaises(kaiten.Deadlock):
            kaiten.load("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
        with self.assertRaises(kaiten.KaitenOSError) as e:
            kaiten.load("/no/such/schedule.csv")
        self.assertIsInstance(e.exception, OSError)
        self.assertTrue(issubclass(kaiten.KaitenMemoryError, MemoryError))


class OnePeriod(unittest.TestCase):
    """The planner, sim, compare, the what-if page, Python and
    kaiten.torch.choose give the same period for the same layout and costs
    (docs/schedules.md, "What a step is")."""

    def test_same_period(self):
        try:
            import kaiten.torch as kt_torch  # needs torch
        except ImportError:
            kt_torch = None
        checked = 0
        for name, v, d in (("1f1b", 1, 1), ("zb-h1", 1, 2), ("interleaved", 2, 1)):
            for sync in ("overlap", "barrier"):
                out = cli_json("plan", "--model", "gpt2-124m", "--devices", 4 * d, "--mem-gb", 16,
                               "--global-batch", 8 * d, "--top", 1, "-p", 4, "-d", d, "-m", 8, "-b",
                               1, "-v", v, "--schedule", name, "--step-sync", sync, "--format",
                               "json")
                cfg = out["configs"][0]
                self.assertEqual(cfg["k"], 1)
                st = cfg["stages"]
                costs = {"tf": [x["f"] for x in st], "tb": [x["i"] for x in st],
                         "tw": [x["w"] for x in st], "comm": cfg["p2p_time"],
                         "t_dp": cfg["dp_time"], "step_sync": sync}
                planned = cfg["step_time"]
                flags = cost_flags(costs, per_stage=True)
                sim = cli_json("sim", "-s", name, "-p", 4, "-m", 8, "-v", v, *flags,
                               "--format", "json")["period"]
                row = cli_json("compare", "-p", 4, "-m", 8, "-v", 2, "--schedules", name, *flags,
                               "--format", "json")["rows"][0]["period"]
                py = kaiten.schedule(name, 4, 8, costs=costs, chunks=v, per_stage=True)
                args = f"schedule={name} p=4 m=8 v={v} per-stage=1 " + " ".join(
                    f"{k.replace('_', '-')}={','.join(map(repr, x)) if isinstance(x, list) else x}"
                    for k, x in costs.items())
                page = json.loads(kaiten._ffi.text_call(kaiten._ffi.lib.kt_ffi_web_run,
                                                        args.encode(), None))
                self.assertTrue(page["ok"], page)
                label = f"{name} d={d} {sync}"
                for what, x in (("sim", sim), ("compare", row), ("python", py.simulate().period),
                                ("page", page["sim"]["period"])):
                    self.assertAlmostEqual(x, planned, delta=1e-12 * planned, msg=f"{label}: {what}")
                if kt_torch is not None:
                    _, seen = kt_torch.choose(4, v, "loop", 8, costs, mem_limit="2x", kinds=[name])
                    self.assertAlmostEqual(seen[name], planned, delta=1e-12 * planned, msg=label)
                checked += 1
        self.assertEqual(checked, 6)


class CompareAgainstCli(unittest.TestCase):
    def test_grid(self):
        cases = 0
        variants = [({}, None, 2, False), ({"tw": 0.5, "mem_wgrad": 0.5}, "0.5x", 2, False),
                    ({"tf": 2, "tb": 2, "tw": 1, "comm": 0.25}, 3, 3, False),
                    ({"tf": 1, "tb": 1, "tw": 1}, None, 2, True)]
        for (p, m), (costs, limit, v, per_stage) in itertools.product(sizes(), variants):
            args = ["compare", "-p", p, "-m", m, "-v", v] + cost_flags(costs, per_stage)
            if limit is not None:
                args += ["--mem-limit", limit]
            c = kaiten.compare(p, m, costs=costs, mem_limit=limit, chunks=v, per_stage=per_stage)
            self.assertEqual(c.data, cli_json(*args, "--format", "json"), " ".join(map(str, args)))
            cases += 1
        self.assertEqual(cases, 36)

    def test_optimal_and_table(self):
        """The exact search's row (bounds, proven) and the text table."""
        for p, m, costs in ((3, 5, {"tw": 0.5}), (2, 3, {"tf": 2, "tb": 2, "tw": 1, "comm": 0.25})):
            names = "1f1b,zb-auto,optimal,zbv"
            c = kaiten.compare(p, m, costs=costs, schedules=names)
            args = ["compare", "-p", p, "-m", m, "--schedules", names] + cost_flags(costs)
            self.assertEqual(c.data, cli_json(*args, "--format", "json"), args)
            self.assertEqual(c.row("optimal")["proven"], True)
            self.assertEqual(c.table(), cli(*args).stdout, args)
            self.assertEqual(c.schedule("optimal").name, "optimal")
        with self.assertRaises(kaiten.KaitenError):
            kaiten.compare(3, 5, schedules="optimal,optimal")

    def test_schedule_file_and_best(self):
        path = os.path.join(DATA, "dualpipev_4rank_10mb.csv")
        costs = {"tf": 18.5, "tb": 18.1, "tw": 9.3, "comm": 0.6}
        c = kaiten.compare(schedules="1f1b,zbv", costs=costs, schedule_file=path)
        ref = cli_json("compare", "--schedule-file", path, "--schedules", "1f1b,zbv",
                       *cost_flags(costs), "--format", "json")
        self.assertEqual(c.data, ref)
        best = c.best()
        self.assertEqual(best["period"], min(r["period"] for r in ref["rows"] if r["applies"]))
        self.assertEqual(c.schedule(best["schedule"]).simulate().period, best["period"])


class PlanAgainstCli(unittest.TestCase):
    def strip(self, d):
        d = json.loads(json.dumps(d))
        d.get("search", {}).pop("seconds", None)
        return d

    def test_searches(self):
        cases = [(dict(devices=4, mem_gb=16, global_batch=32, top=3),
                  ["--devices", 4, "--mem-gb", 16, "--global-batch", 32, "--top", 3]),
                 (dict(devices=8, mem_gb=80, global_batch=1024, seq_len=1024, pipeline=4,
                       data_parallel=2, micro_batch_size=2, schedules=["1f1b", "zb-h1"],
                       microbatches=16),
                  ["--devices", 8, "--mem-gb", 80, "--global-batch", 1024, "--seq-len", 1024,
                   "-p", 4, "-d", 2, "-b", 2, "--schedule", "1f1b,zb-h1", "--microbatches", 16]),
                 (dict(devices=16, mem_gb=40, global_batch=256, zero=1, recompute="selective,full",
                       bytes_per_param=(2, 2, 12), tflops=400, efficiency=0.4, max_bubble=0.3,
                       devices_per_node=4, nodes="pp-inside"),
                  ["--devices", 16, "--mem-gb", 40, "--global-batch", 256, "--zero", 1,
                   "--recompute", "selective,full", "--bytes-per-param", "2,2,12", "--tflops", 400,
                   "--efficiency", 0.4, "--max-bubble", 0.3, "--devices-per-node", 4, "--nodes",
                   "pp-inside"])]
        models = {"gpt2-124m": "gpt2-124m", "llama-7b": "llama-7b"}
        for (kw, flags), model in itertools.product(cases, models):
            p = kaiten.plan(model, **kw)
            out = cli("plan", "--model", model, *flags, "--format", "json", ok=False)
            ref = json.loads(out.stdout)
            self.assertEqual(self.strip(p), self.strip(ref), f"{model} {flags}")
            if out.returncode == 1:  # nothing fits: the same reason
                self.assertEqual(f"kaiten: {p.nothing_fits}", out.stderr.strip())
                continue
            self.assertEqual(out.returncode, 0)
            self.assertIsNone(p.nothing_fits)
            self.assertEqual(p.best, ref["configs"][0])

    def test_nothing_fits(self):
        p = kaiten.plan("llama-7b", devices=2, mem_gb=1, global_batch=8)
        ref = cli("plan", "--model", "llama-7b", "--devices", 2, "--mem-gb", 1, "--global-batch", 8,
                  "--format", "json", ok=False)
        self.assertEqual(ref.returncode, 1)
        self.assertEqual(self.strip(p), self.strip(json.loads(ref.stdout)))
        self.assertIsNone(p.best)
        self.assertEqual(f"kaiten: {p.nothing_fits}", ref.stderr.strip())

    def test_model_dict_and_partition_only(self):
        spec = {"name": "tiny", "blocks": 6, "hidden": 256, "heads": 4, "vocab": 50257,
                "seq_len": 128}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(spec, f)
            f.flush()
            for stages, extra in ((2, {}), (4, {"mem_gb": 1}), (3, {"recompute": "full"})):
                flags = ["--mem-gb", extra["mem_gb"]] if "mem_gb" in extra else []
                flags += ["--recompute", extra["recompute"]] if "recompute" in extra else []
                p = kaiten.plan(spec, partition_only=True, stages=stages, **extra)
                ref = cli_json("plan", "--partition-only", "--model", f.name, "--stages", stages,
                               *flags, "--format", "json")
                self.assertEqual(p, ref, stages)
            p = kaiten.plan(spec, devices=4, mem_gb=8, global_batch=16)
            ref = cli_json("plan", "--model", f.name, "--devices", 4, "--mem-gb", 8,
                           "--global-batch", 16, "--format", "json")
            self.assertEqual(self.strip(p), self.strip(ref))


class Partition(unittest.TestCase):
    def test_exact_minmax(self):
        """kaiten.partition's bottleneck is the smallest over every cut (brute force)."""
        rng = random.Random(7)
        for _ in range(300):
            n = rng.randint(1, 9)
            loads = [rng.choice([0.5, 1, 1, 2, 3, 7.5]) for _ in range(n)]
            stages = rng.randint(1, n)
            counts, bott = kaiten.partition(loads, stages)
            self.assertEqual(sum(counts), n)
            self.assertTrue(all(c >= 1 for c in counts))
            at, worst = 0, 0.0
            for c in counts:
                worst = max(worst, sum(loads[at:at + c]))
                at += c
            self.assertEqual(worst, bott)
            best = min(max(sum(loads[a:b]) for a, b in zip((0,) + cuts, cuts + (n,)))
                       for cuts in itertools.combinations(range(1, n), stages - 1))
            self.assertAlmostEqual(bott, best, places=12, msg=f"{loads} into {stages}")

    def test_memory_cap(self):
        counts, _ = kaiten.partition([1, 1, 1, 1], 2, fixed=[3, 0, 0, 0], act=[0, 1, 1, 1],
                                     mem_cap=3.5)
        self.assertEqual(counts, [1, 3])
        with self.assertRaises(kaiten.KaitenError):
            kaiten.partition([1, 1], 2, fixed=[5, 5], mem_cap=1)


class Packing(unittest.TestCase):
    """kaiten.pack: the library's packing and order, per-micro-batch costs
    through the cost-file format, and the same step as `kaiten sim`."""

    def test_documents(self):
        docs = [700, 20, 900, 300, 64, 1000, 512, 128, 256, 800, 90, 400, 33, 600, 1024, 48]
        fifo = kaiten.pack("1f1b", 4, documents=docs, microbatches=8, packing="fifo")
        bal = kaiten.pack("1f1b", 4, documents=docs, microbatches=8, packing="balanced")
        for p in (fifo, bal):
            placed = sorted(d for mb in p.micro_batches for d in mb)
            self.assertEqual(len(placed), len(set(placed)))
            self.assertTrue(all(t <= 1024 for t in p.tokens))
            self.assertEqual(p.tokens, [sum(docs[d] for d in mb) for mb in p.micro_batches])
        self.assertEqual(fifo.order, list(range(8)))
        self.assertEqual(sorted(bal.order), list(range(8)))
        self.assertGreater(bal.period, 0)
        with self.assertRaises(kaiten.InvalidArgument):
            kaiten.pack(documents=[2048], microbatches=1)
        with self.assertRaises(kaiten.InvalidArgument):
            kaiten.pack(documents=docs, microbatches=8, packing="lpt")

    def test_lengths_and_costs(self):
        lengths = [1000, 100, 900, 50, 800, 200, 30, 700]
        p = kaiten.pack("zb-auto", 4, lengths=lengths)
        self.assertEqual(sorted(p.order), list(range(8)))
        self.assertEqual(p.tokens, [lengths[k] for k in p.order])
        # the order's costs as a cost file's per-micro-batch lists: the period the search found
        load = [0.75 * t / 1024 + 0.25 * t * t / 1024 ** 2 for t in p.tokens]
        costs = {k: [load] * 4 for k in ("tf", "tb", "tw")}
        costs["mem_act"] = [[t / 1024 for t in p.tokens]] * 4
        sim = kaiten.schedule("zb-auto", 4, 8, costs=costs, per_stage=True).simulate()
        self.assertAlmostEqual(sim.period, p.period, places=9)
        cli = json.loads(subprocess.run(
            [os.environ["KT_CLI"], "sim", "-s", "zb-auto", "-p", "4", "-m", "8", "--per-stage",
             "--tf", ";".join(",".join(repr(x) for x in load) for _ in range(4)),
             "--tb", ";".join(",".join(repr(x) for x in load) for _ in range(4)),
             "--tw", ";".join(",".join(repr(x) for x in load) for _ in range(4)),
             "--mem-act", ";".join(",".join(repr(t / 1024) for t in p.tokens) for _ in range(4)),
             "--format", "json"], check=True, capture_output=True, text=True).stdout)
        self.assertAlmostEqual(cli["period"], sim.period, places=12)


class Lifetimes(unittest.TestCase):
    def test_many_objects(self):
        """Handles are freed with their objects; a result outlives its inputs."""
        sims = []
        for i in range(100):
            s = kaiten.schedule("zb-auto" if i % 2 else "interleaved", 4, 8,
                                costs={"tf": [1, 2, 1, 2, 1, 2, 1, 2] if i % 2 == 0 else 1})
            sims.append(s.simulate())
            del s
        self.assertEqual(len({json.dumps(x.data) for x in sims}), 2)
        c = kaiten.compare(3, 6)
        s = c.schedule("zbv")
        del c
        self.assertIn("rank 0", s.gantt())


if __name__ == "__main__":
    unittest.main(verbosity=1)
