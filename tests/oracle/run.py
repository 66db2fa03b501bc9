"""The oracle: kaiten's schedule files checked by PyTorch itself.

Run through scripts/torch-oracle.sh (it makes the venv with torch 2.15).
Not part of CI. Three sections:

  export   every schedule kaiten lists x P in {2,3,4,8} x M in {P, 2P, 3P+1},
           written compute-only (--format torch-csv) and lowered
           (--format torch-csv-comms), through torch's checks and loader
  torch    torch's own schedule classes at the same sizes, dumped as
           _dump_csv writes them: kaiten validates, simulates and trains
           each (threads) with losses equal to the unpipelined model
  runtime  torch's _PipelineScheduleRuntime runs kaiten's zb-h1, zbv and
           zb-auto files (both formats) on gloo at P=2 and P=4: losses
           equal torch's ScheduleGPipe on the same model and data
  python   the Python package's kaiten.torch (profile, partition,
           build_schedule; tests/oracle/kaiten_torch.py) with python/ on
           the path and the build's shared libraries

Prints a summary; --record FILE rewrites the summary between the oracle
markers in FILE (docs/pytorch.md).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import torch_checks as T  # noqa: E402

BEGIN, END = "<!-- oracle:begin -->", "<!-- oracle:end -->"
RUNTIME_SCHEDULES = ("zb-h1", "zbv", "zb-auto")


class Kaiten:
    def __init__(self, path):
        self.path = path

    def run(self, *args):
        p = subprocess.run([self.path, *args], capture_output=True, text=True)
        err = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        for a in args:  # name files by their base name in messages
            if os.sep in a:
                err = err.replace(a, os.path.basename(a))
        return p.returncode, p.stdout, err

    def schedules(self):
        """Every schedule kaiten knows: compare's rows list them all."""
        rc, out, err = self.run("compare", "-p", "2", "-m", "4", "--format", "json")
        if rc:
            sys.exit(f"oracle: kaiten compare failed: {err}")
        return [row["schedule"] for row in json.loads(out)["rows"]]

    def losses(self, *args):
        rc, out, err = self.run("train", "--model", "mlp", "--steps", "2", "--no-live", "--format",
                                "json", "--hidden", "16", *args)
        if rc:
            return None, err
        return json.loads(out)["losses"], None


def grid(ps):
    for p in ps:
        for m in (p, 2 * p, 3 * p + 1):
            yield p, m


def failures(checks):
    return {k: v for k, v in checks.items() if v is not None}


def section_export(k, ps, tmp):
    rows = []
    for name in k.schedules():
        for p, m in grid(ps):
            base = os.path.join(tmp, f"{name}_p{p}_m{m}")
            rc, _, err = k.run("sim", "--schedule", name, "-p", str(p), "-m", str(m), "--format",
                               "torch-csv", "-o", base + ".csv")
            if rc:
                rows.append({"schedule": name, "p": p, "m": m, "kaiten_refuses": err})
                continue
            k.run("sim", "--schedule", name, "-p", str(p), "-m", str(m), "--format",
                  "torch-csv-comms", "-o", base + "_comms.csv")
            rows.append({"schedule": name, "p": p, "m": m,
                         "compute_only": failures(T.check_compute_only(base + ".csv")),
                         "lowered": failures(T.check_lowered(base + "_comms.csv"))})
    return rows


def _close(a, b, rel=1e-5):
    return a is not None and b is not None and len(a) == len(b) and all(
        abs(x - y) <= rel * max(abs(y), 1e-12) for x, y in zip(a, b))


def section_torch(k, ps, tmp):
    rows, refs = [], {}
    for name in T.TORCH_CLASSES:
        for p, m in grid(ps):
            row = {"class": name, "p": p, "m": m}
            rows.append(row)
            try:
                text, sched = T.torch_class_order(name, p, m)
            except Exception as e:
                row["torch_refuses"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                continue
            path = os.path.join(tmp, f"{name}_p{p}_m{m}.csv")
            with open(path, "w") as f:
                f.write(text)
            own = T.check_compute_only(path)
            row["torch_validates_own"] = own.get("_validate_schedule")
            row["torch_simulates_own"] = own.get("_simulate_comms_compute")
            rc, _, err = k.run("validate", "-q", path)
            row["kaiten_validate"] = None if rc == 0 else err
            if rc:
                continue
            rc, out, err = k.run("sim", "--schedule-file", path, "--format", "json")
            row["kaiten_sim"] = None if rc == 0 else err
            if rc == 0:
                row["makespan"] = json.loads(out)["makespan"]
            n_stages = max(T.stage_map(T.read_actions(path))) + 1
            got, err = k.losses("--schedule-file", path, "--micro-batch-size", "4", "--layers",
                                str(n_stages))
            key = (m, n_stages)
            if key not in refs:
                refs[key] = k.losses("--stages", "1", "--schedule", "gpipe", "-m", "1",
                                     "--micro-batch-size", str(4 * m), "--layers", str(n_stages))[0]
            row["kaiten_train"] = err if err else (
                None if _close(got, refs[key]) else f"losses {got} vs unpipelined {refs[key]}")
    return rows


def section_runtime(k, tmp):
    import execute
    out = []
    for p in (2, 4):
        m = 2 * p
        jobs = [{"name": "ScheduleGPipe", "file": None, "format": None}]
        for name in RUNTIME_SCHEDULES:
            base = os.path.join(tmp, f"rt_{name}_p{p}")
            for fmt, flag, suffix in (("compute_only", "torch-csv", ".csv"),
                                      ("compute_comms", "torch-csv-comms", "_comms.csv")):
                rc, _, err = k.run("sim", "--schedule", name, "-p", str(p), "-m", str(m), "--format",
                                   flag, "-o", base + suffix)
                if rc:
                    out.append({"p": p, "schedule": name, "format": fmt, "error": err})
                    continue
                jobs.append({"name": f"{name} {fmt}", "file": base + suffix, "format": fmt})
        # a control that must fail: the lowered zbv file without its reductions
        # (torch then never scales the summed gradients by 1/M)
        src = os.path.join(tmp, f"rt_zbv_p{p}_comms.csv")
        ctl = os.path.join(tmp, f"rt_control_p{p}.csv")
        with open(src) as f, open(ctl, "w") as g:
            for line in f:
                g.write(",".join(c for c in line.strip().split(",") if "REDUCE_GRAD" not in c) + "\n")
        jobs.append({"name": "control: zbv compute_comms without REDUCE_GRAD", "file": ctl,
                     "format": "compute_comms"})
        res = execute.run(p, m, jobs, os.path.join(tmp, f"runtime_p{p}.json"))
        ref = res["ScheduleGPipe"].get("losses")
        for job in jobs[1:]:
            r = res[job["name"]]
            row = {"p": p, "m": m, "job": job["name"], "losses": r.get("losses"),
                   "error": r.get("error"), "reference": ref}
            row["equal"] = _close(r.get("losses"), ref)
            out.append(row)
    return out


def section_python(repo, tmp):
    sys.path.insert(0, os.path.join(repo, "python"))
    os.environ.setdefault("KAITEN_LIB_DIR", os.path.join(repo, "build"))
    import kaiten_torch
    checks = {}
    checks.update(kaiten_torch.check_profile())
    checks.update(kaiten_torch.check_partition())
    return {"checks": checks, "training": kaiten_torch.check_training(tmp)}


def summarize_python(py, add):
    checks, rows = py["checks"], py["training"]
    ok = [k for k, v in checks.items() if v is None]
    add(f"**kaiten.torch** (python/kaiten/torch): {len(ok)} of {len(checks)} checks of profile and "
        "partition pass" + ("." if len(ok) == len(checks) else ":"))
    for k, v in checks.items():
        if v is not None:
            add(f"- {k}: {v}")
    real = [r for r in rows if not r["job"].startswith("control")]
    good = [r for r in real if r["equal"] and r["order_matches"] and r["same_cut"]]
    cuts = "; ".join(f"P={r['p']}: {r['cut']}" for r in rows if r["job"] == real[0]["job"])
    add(f"- build_schedule: {len(good)} of {len(real)} runs (zb-auto in both CSV forms, auto, 1f1b, "
        "zb-auto with V=2, zbv-auto in v placement; P=2 and P=4; gloo, one process per rank, "
        "a GPT-2-style model cut where kaiten.torch.partition says, 3 SGD steps) give the losses "
        "of torch's ScheduleGPipe on the even split to 1e-5, with torch's runtime holding "
        f"kaiten's lowered order action for action (the cuts: {cuts}).")
    for r in real:
        if r not in good:
            add(f"- P={r['p']} {r['job']}: {r['error'] or r['losses']} (order matches: "
                f"{r['order_matches']}, same cut on every rank: {r['same_cut']})")
    for r in rows:
        if r["job"].startswith("control"):
            add(f"- {r['job']} (P={r['p']}): losses "
                f"{'differ, as they must' if not r['equal'] else 'EQUAL (the check is blind)'} "
                f"({r['losses'][-1] if r.get('losses') else r.get('error')} vs "
                f"{r['reference'][-1]} at the last step)")


def summarize(results):
    lines = []
    add = lines.append
    add(f"Last run: {results['date']}, torch {results['torch_version']}, kaiten {results['kaiten']} "
        f"(`scripts/torch-oracle.sh run`, {results['seconds']:.0f} s on 2 cores).")
    add("")
    exp = results.get("export", [])
    if exp:
        made = [r for r in exp if "kaiten_refuses" not in r]
        add(f"**Export** ({len(results['schedules'])} schedules: {', '.join(results['schedules'])}; "
            f"P in {results['ps']}, M in {{P, 2P, 3P+1}}): {len(exp)} cases, kaiten writes "
            f"{len(made)} ({len(exp) - len(made)} sizes the schedule does not take"
            + "".join(sorted({f"; {r['schedule']}: {r['kaiten_refuses'].split(': ', 1)[-1].split(' (')[0]}"
                              for r in exp if "kaiten_refuses" in r})) + ").")
        for form in ("compute_only", "lowered"):
            ok = [r for r in made if not r[form]]
            add(f"- {form.replace('_', '-')} files: torch accepts {len(ok)} of {len(made)} in every check.")
            why = {}
            for r in made:
                for check, msg in r[form].items():
                    why.setdefault((r["schedule"], check, msg.split(":")[0]), []).append(f"P={r['p']} M={r['m']}")
            for (sched, check, kind), where in sorted(why.items()):
                add(f"  - {sched}: `{check}` fails ({kind}) at {len(where)} sizes")
        add("")
    tor = results.get("torch", [])
    if tor:
        made = [r for r in tor if "torch_refuses" not in r]
        add(f"**torch's schedule classes** ({len(T.TORCH_CLASSES)} classes x the same sizes = "
            f"{len(tor)} cases; torch itself refuses {len(tor) - len(made)} sizes):")
        by = {}
        for r in made:
            by.setdefault(r["class"], []).append(r)
        for cls, rs in by.items():
            full = [r for r in rs if not r.get("kaiten_validate") and not r.get("kaiten_sim")
                    and not r.get("kaiten_train")]
            own_bad = [r for r in rs if r.get("torch_validates_own")]
            own_sim = [r for r in rs if r.get("torch_simulates_own")]
            line = f"- {cls}: kaiten validates, simulates and trains {len(full)} of {len(rs)}"
            if own_bad:
                line += (f"; torch's own `_validate_schedule` refuses {len(own_bad)} of its own "
                         f"orders ({own_bad[0]['torch_validates_own'].split(':')[0]}: "
                         f"{own_bad[0]['torch_validates_own'].split(':', 1)[1].strip()[:90]}...)")
            if own_sim:
                line += (f"; torch's `_simulate_comms_compute` fails on {len(own_sim)} of torch's "
                         f"own orders ({own_sim[0]['torch_simulates_own'][:60]})")
            bad = [r for r in rs if r not in full]
            if bad:
                r = bad[0]
                msg = r.get("kaiten_validate") or r.get("kaiten_sim") or r.get("kaiten_train")
                line += f"; kaiten refuses {len(bad)}, e.g. P={r['p']} M={r['m']}: {msg[:160]}"
            add(line)
        add("")
    rt = results.get("runtime", [])
    if rt:
        real = [r for r in rt if not r.get("job", "").startswith("control")]
        ok = [r for r in real if r.get("equal")]
        add(f"**Real execution** (`_PipelineScheduleRuntime`, gloo, CPU, one process per rank, "
            f"MLP of 8 layers, 3 SGD steps): {len(ok)} of {len(real)} runs of kaiten's "
            f"{', '.join(RUNTIME_SCHEDULES)} files (compute-only and compute_comms, P=2 and P=4) "
            f"give the losses of torch's ScheduleGPipe to 1e-5.")
        for r in real:
            if not r.get("equal"):
                add(f"- P={r['p']} {r.get('job', r.get('schedule'))}: {r.get('error') or r.get('losses')}")
        for r in rt:
            if r.get("job", "").startswith("control"):
                add(f"- {r['job']} (P={r['p']}): losses {'differ, as they must' if not r['equal'] else 'EQUAL (the check is blind)'}"
                    f" ({r['losses'][-1] if r.get('losses') else r.get('error')} vs {r['reference'][-1]} at the last step)")
        add("")
    if results.get("python"):
        summarize_python(results["python"], add)
    return "\n".join(lines).rstrip("\n")


def record(path, summary):
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"oracle: {path} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{summary}\n{END}{tail}"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--kaiten", help="the kaiten binary (default REPO/build/kaiten)")
    ap.add_argument("--sections", default="export,torch,runtime,python")
    ap.add_argument("--ps", default="2,3,4,8", help="pipeline sizes of the grids")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "kaiten-oracle", "results.json"))
    ap.add_argument("--record", help="write the summary into this file between the oracle markers")
    ap.add_argument("--from-results", help="summarize this results file of an earlier run instead of running")
    a = ap.parse_args()
    if a.from_results:
        with open(a.from_results) as f:
            summary = summarize(json.load(f))
        print(summary)
        if a.record:
            record(a.record, summary)
        return
    k = Kaiten(a.kaiten or os.path.join(a.repo, "build", "kaiten"))
    if not os.access(k.path, os.X_OK):
        sys.exit(f"oracle: {k.path} is not built (make build)")
    ps = [int(x) for x in a.ps.split(",")]
    sections = a.sections.split(",")
    start = datetime.datetime.now()
    version = subprocess.run(["git", "-C", a.repo, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
    results = {"date": start.strftime("%Y-%m-%d"), "torch_version": torch.__version__, "kaiten": version,
               "ps": ps, "schedules": k.schedules()}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if "export" in sections:
            results["export"] = section_export(k, ps, tmp)
        if "torch" in sections:
            results["torch"] = section_torch(k, ps, tmp)
        if "runtime" in sections:
            results["runtime"] = section_runtime(k, tmp)
        if "python" in sections:
            results["python"] = section_python(a.repo, tmp)
    results["seconds"] = (datetime.datetime.now() - start).total_seconds()
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    summary = summarize(results)
    print(summary)
    print(f"\n(details: {a.out})")
    if a.record:
        record(a.record, summary)


if __name__ == "__main__":
    main()
