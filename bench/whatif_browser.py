"""How long the what-if panel takes per change, in headless Chromium (run by
bench/whatif.sh):  whatif_browser.py KAITEN CHROMIUM TMPDIR REPS [SIZES]

For each size (P, M) and schedule: a sim report, its panel opened, then
REPS changes (a T_F slider, M, the link latency, in turn); per change the
panel's own clocks (src/report/whatif.js): from the input event until the
page is laid out again (data-ms), the re-simulation and redraw alone
(data-ms-work) and the simulator's call with its JSON parsed (data-ms-sim).
Searching schedules (zb-auto, zbv, v-half) answer a moving slider from
their quick search; letting go runs the full one, timed as "release".
Prints one line per case: P M schedule actions, then median min max of each.
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from cdp import Browser  # noqa: E402

K, CHROMIUM, TMP, REPS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
SIZES = [tuple(map(int, s.split("x"))) for s in (sys.argv[5] if len(sys.argv) > 5 else "8x64,32x256").split(",")]
SCHEDULES = ["1f1b", "interleaved", "zb-h1", "zbv", "zb-auto", "v-half"]


def case(b, p, m, name):
    path = "%s/%s-%d-%d.html" % (TMP, name, p, m)
    subprocess.run([K, "sim", "--schedule", name, "-p", str(p), "-m", str(m), "--report", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    page = b.page(1400, 1400)
    page.goto("file://" + path)
    page.wait("document.body.dataset.kt === 'ready'")
    page.eval("(function(){var d=document.querySelector('details.kt-whatif');d.open=true;})()")
    page.wait("document.querySelector('details.kt-whatif').dataset.state === 'ready'", timeout=120)
    panel = "window.ktWhatIf.panels[0]"
    acts = page.eval("%s.res.sim.events.length" % panel)
    moves = [("tf", v) for v in (1.2, 0.9, 1.1)] + [("m", m - 1), ("m", m)] + [("lat", v) for v in (0.1, 0)]
    out = {"ms": [], "work": [], "sim": [], "release": []}
    for i in range(REPS):
        key, value = moves[i % len(moves)]
        runs = page.eval("+%s.host.dataset.runs" % panel)
        page.eval("(function(){var el=%s.box.querySelector('[data-k=\"%s\"]');el.value=%s;"
                  "el.dispatchEvent(new Event('input'));})()" % (panel, key, json.dumps(str(value))))
        page.wait("+%s.host.dataset.runs > %d && !%s.pending" % (panel, runs, panel), timeout=120)
        d = page.eval("(function(){var d=%s.host.dataset;return [+d.ms,+d.msWork,+d.msSim,d.state,d.quick];})()"
                      % panel)
        if d[3] != "ready":
            raise RuntimeError("%s P=%d M=%d: %s after %s=%s" % (name, p, m, d[3], key, value))
        out["ms"].append(d[0])
        out["work"].append(d[1])
        out["sim"].append(d[2])
        # let go: a searching schedule runs its full search (kaiten sim's)
        runs = page.eval("+%s.host.dataset.runs" % panel)
        page.eval("%s.box.querySelector('[data-k=\"%s\"]').dispatchEvent(new Event('change'))" % (panel, key))
        if d[4] == "1":
            page.wait("+%s.host.dataset.runs > %d && !%s.pending" % (panel, runs, panel), timeout=120)
            out["release"].append(page.eval("+%s.host.dataset.ms" % panel))
    errs = page.errors()
    if errs:
        raise RuntimeError("console errors: %s" % errs)
    page.call("Target.closeTarget", {"targetId": page.call("Target.getTargetInfo")["targetInfo"]["targetId"]})
    return acts, out


with Browser(CHROMIUM) as b:
    for p, m in SIZES:
        for name in SCHEDULES:
            acts, out = case(b, p, m, name)
            cols = []
            for k in ("ms", "work", "sim", "release"):
                v = out[k] or [float("nan")]
                cols += ["%.1f" % statistics.median(v), "%.1f" % min(v), "%.1f" % max(v)]
            print("%d %d %s %d %s" % (p, m, name, acts, " ".join(cols)), flush=True)
