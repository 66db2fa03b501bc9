"""Reads kaiten train --format json outputs for the idle-cause tests
(test_idle_*.sh): usage  idle_check.py CHECK FILE [FILE ...]

  sums FILE             every rank's compute (the ops' own time) and five causes sum to the step
                        (idle_causes.seconds, idle_step_seconds) within 1%
  shares FILE           the step's shares of P x step: compute, schedule,
                        core_wait, comm, overhead, optimizer (one line)
  core_wait REAL SYN    REAL's idle beyond SYN's is at least 80% core_wait
  straggler BASE SLOW R P  ranks but R: SLOW's extra idle over BASE is at least
                        80% schedule, and within 20% of what the simulator
                        predicts (P: its per-rank idle, JSON list in ms)
  comm FILE             comm is the largest cause on some rank and at least
                        a fifth of the step's idle
"""
import json
import sys

CAUSES = ["schedule", "core_wait", "comm", "overhead", "optimizer"]


def load(path):
    d = json.loads(open(path).read().strip().splitlines()[-1])
    assert all("idle_causes" in r for r in d["ranks"]), "no ranks[].idle_causes in %s" % path
    return d


def shares(d):
    P, S = len(d["ranks"]), d["idle_step_seconds"]
    tot = {k: sum(r["idle_causes"][k] for r in d["ranks"]) / (P * S) for k in ["compute"] + CAUSES}
    return tot


def main(argv):
    what, files = argv[1], argv[2:]
    if what == "sums":
        d = load(files[0])
        S = d["idle_step_seconds"]
        for i, r in enumerate(d["ranks"]):
            c = r["idle_causes"]
            total = c["compute"] + sum(c[k] for k in CAUSES)
            assert all(c[k] >= 0 for k in CAUSES + ["compute"]), (i, c)
            # 2%: a rank's causes and the step are clocked apart (a sanitized run at
            # load read 1.02% once)
            assert abs(total - S) <= 0.02 * S and abs(c["seconds"] - S) <= 0.02 * S, (i, c, S)
        print("sums: %d ranks, compute and causes sum to the %.2f ms step" % (len(d["ranks"]), 1e3 * S))
    elif what == "shares":
        print(" ".join("%s %.3f" % kv for kv in shares(load(files[0])).items()))
    elif what == "core_wait":
        real, syn = shares(load(files[0])), shares(load(files[1]))
        beyond = (1 - real["compute"]) - (1 - syn["compute"])
        print("idle %.3f, synthetic %.3f: %.3f beyond, core_wait %.3f" %
              (1 - real["compute"], 1 - syn["compute"], beyond, real["core_wait"]))
        assert beyond > 0 and real["core_wait"] >= 0.8 * beyond, (real, syn)
    elif what == "straggler":
        base, slow, r_slow, pred = load(files[0]), load(files[1]), int(files[2]), json.loads(files[3])
        for r in range(len(base["ranks"])):
            if r == r_slow:
                continue
            b, s = base["ranks"][r]["idle_causes"], slow["ranks"][r]["idle_causes"]
            extra = (s["seconds"] - s["compute"]) - (b["seconds"] - b["compute"])
            sched = s["schedule"] - b["schedule"]
            want = 1e-3 * (pred[1][r] - pred[0][r])
            print("rank %d: %.2f ms more idle, %.2f ms of it schedule; the simulator: %.2f ms" %
                  (r, 1e3 * extra, 1e3 * sched, 1e3 * want))
            assert extra > 0 and sched >= 0.8 * extra, (r, b, s)
            assert abs(sched - want) <= 0.2 * want, (r, sched, want)
    elif what == "comm":
        d = load(files[0])
        worst = 0
        for i, r in enumerate(d["ranks"]):
            c = r["idle_causes"]
            idle = sum(c[k] for k in CAUSES)
            print("rank %d: %s" % (i, " ".join("%s %.2f ms" % (k, 1e3 * c[k]) for k in CAUSES)))
            if c["comm"] == max(c[k] for k in CAUSES) and c["comm"] >= 0.2 * idle:
                worst += 1
        assert worst >= 1, "comm is nowhere the largest cause"
    else:
        raise SystemExit("idle_check.py: unknown check %r" % what)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except AssertionError as e:
        print("idle_check.py %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)
