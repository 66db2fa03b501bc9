#!/usr/bin/env python3
"""What a step is, measured: `kaiten train` with --step-sync overlap and
barrier, against the period `sim` and the run's own prediction give.

1. Synthetic ops (sleeps: P=4 runs faithfully on 2 cores), P=4, M=8,
   tf = tb = tw = 2 ms, for gpipe, 1f1b, zb-h1, zb-h2, zbv and zb-auto: the
   steady period (median step after the first) against the predicted one,
   in both modes, and zb-h2's tokens/s over zb-h1's.
2. The default GPT at P=2 on threads and under MPI: overlap against
   barrier, paired run by run (the two modes alternate), the measured gain
   (barrier's median step / overlap's - 1) against the predicted one.

Usage: bench/step_sync.py [--reps N] [--steps N] [--no-mpi] [BUILD_DIR]
Prints a table; medians of the repetitions, ratios paired run by run.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

SCHEDULES = ["gpipe", "1f1b", "zb-h1", "zb-h2", "zbv", "zb-auto"]


def train(kaiten, args, mpi=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [kaiten, "train", "--no-live", "--format", "json", "-o", out] + args
        if mpi:
            cmd = [mpi, "-np", "2", "--oversubscribe"] + cmd + ["--transport", "mpi"]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, timeout=600)
        return json.load(open(out))


def sim_period(kaiten, sched, sync):
    r = subprocess.run([kaiten, "sim", "-s", sched, "-p", "4", "-m", "8", "--tf", "2", "--tb", "2",
                        "--tw", "2", "--step-sync", sync, "--format", "json"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["period"] * 1e-3  # ms -> s


def synthetic(kaiten, reps, steps):
    print("## synthetic, P=4 M=8 tf=tb=tw=2 ms (%d steps, %d runs each, modes alternating)" % (steps, reps))
    print("%-8s %-8s %11s %11s %11s %9s %9s" % ("schedule", "sync", "sim (ms)", "pred (ms)",
                                                "meas (ms)", "meas/pred", "meas/sim"))
    tps = {}
    for s in SCHEDULES:
        runs = {"overlap": [], "barrier": []}
        for _ in range(reps):
            for sync in ("overlap", "barrier"):
                runs[sync].append(train(kaiten, ["--synthetic", "--tf", "2", "--tb", "2", "--tw", "2",
                                                 "--stages", "4", "-m", "8", "-s", s, "--steps",
                                                 str(steps), "--step-sync", sync]))
        for sync in ("overlap", "barrier"):
            meas = statistics.median(r["median_step_seconds"] for r in runs[sync])
            pred = statistics.median(r["predicted_step_seconds"] for r in runs[sync])
            simp = sim_period(kaiten, s, sync)
            tps[(s, sync)] = [r["steady_tokens_per_s"] for r in runs[sync]]
            print("%-8s %-8s %11.2f %11.2f %11.2f %9.3f %9.3f" % (s, sync, 1e3 * simp, 1e3 * pred,
                                                                 1e3 * meas, meas / pred, meas / simp))
    for sync in ("overlap", "barrier"):
        ratios = [a / b for a, b in zip(tps[("zb-h2", sync)], tps[("zb-h1", sync)])]
        print("zb-h2 / zb-h1 steady tokens/s, %s: %.3f (median of %d runs: %s)" % (
            sync, statistics.median(ratios), len(ratios), ", ".join("%.3f" % x for x in ratios)))


def gpt(kaiten, reps, steps, mpi):
    where = "MPI (2 processes)" if mpi else "threads"
    print("## default GPT, P=2, 1f1b, %s, %d steps, %d pairs" % (where, steps, reps))
    meas, pred = [], []
    for _ in range(reps):
        o = train(kaiten, ["--stages", "2", "--steps", str(steps), "--step-sync", "overlap"], mpi)
        b = train(kaiten, ["--stages", "2", "--steps", str(steps), "--step-sync", "barrier"], mpi)
        meas.append(b["median_step_seconds"] / o["median_step_seconds"] - 1)
        pred.append(b["predicted_step_seconds"] / o["predicted_step_seconds"] - 1)
        print("  pair: overlap %.2f ms (pred %.2f, %d rollbacks, %d steps waited)  barrier %.2f ms "
              "(pred %.2f)" % (1e3 * o["median_step_seconds"], 1e3 * o["predicted_step_seconds"],
                               o["rollbacks"], o["waited_steps"], 1e3 * b["median_step_seconds"],
                               1e3 * b["predicted_step_seconds"]))
    print("gain of overlap over barrier: measured %+.1f%% (median of paired), predicted %+.1f%%; "
          "difference %.1f points" % (100 * statistics.median(meas), 100 * statistics.median(pred),
                                       100 * abs(statistics.median(meas) - statistics.median(pred))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--no-mpi", action="store_true")
    a = ap.parse_args()
    kaiten = os.path.join(a.build, "kaiten")
    print("# %s, load %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                             open("/proc/loadavg").read().split()[0]))
    synthetic(kaiten, a.reps, a.steps)
    gpt(kaiten, a.reps, 50, None)
    mpi = shutil.which("mpirun")
    if mpi and not a.no_mpi:
        gpt(kaiten, a.reps, 50, mpi)


if __name__ == "__main__":
    sys.exit(main())
