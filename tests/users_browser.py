"""What a user sees of a training run, in headless Chromium (run by
browser_part.sh, one CTest entry per part):
  users_browser.py PART KAITEN CHROMIUM TMPDIR

  report    kaiten report of a v-half run (P=4, V=2, M=16): the what-if
            panel's first simulation is the run's own prediction (makespan
            and every action's start within 1e-9 relative, timeline.json's
            predicted events), the traced step's header prints the costs
            calibrated per stage, and a diff against the measured step
            moves exactly what the measurement moved (a run whose measured
            step is its prediction with three actions late: 3 moved, by
            what they were moved)
  serve     the same checks on `kaiten serve`'s dashboard of those runs
  live      `kaiten train --serve`: the panel under the live prediction
            starts from that prediction; the bubble chart's predicted line
            has a point at every step (the latest prediction at or before
            it), also on `kaiten serve` (part serve)
  memory    a zb-auto run under --mem-limit 0.5x and a 1f1b run: the run
            report says the peak against 1F1B's, the price in time and the
            model's memory per stage, and its memory charts draw 1F1B's peak and the limit; `kaiten
            serve` of both puts their peaks side by side (and 1F1B's), the
            "Now" table says peak and price (and under each run its memory
            and calibrated costs per stage), each run's memory chart marks
            1F1B's peak and the limit where config.json has them
  gantt     the measured Gantt of v-half runs at P=4, V=2, M=16 and P=8,
            V=2, M=32 in the run report and on `kaiten serve`: labels never
            overlap, the critical path's marks never cover a bar
            (screenshots left in TMPDIR)
"""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cdp import Browser, Tally, open_whatif, start_dashboard  # noqa: E402

PART, K, CHROMIUM, TMP = sys.argv[1:5]
check = Tally()
RUN = ["--model", "gpt", "--layers", "8", "--stages", "4", "--schedule", "v-half", "-m", "16",
       "-b", "2", "--no-live"]
LATE = 5e-4  # seconds the edited run's three actions start late


def rel_close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * abs(b) + 1e-15


def train(name, steps=3, extra=()):
    run = TMP + "/" + name
    subprocess.run([K, "train"] + RUN + ["--steps", str(steps), "--run-dir", run] + list(extra),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run


def late_copy(run, name):
    """A copy of run whose measured step is its prediction, with rank 0's
    last three actions LATE seconds later; returns (dir, their keys)."""
    out = TMP + "/" + name
    shutil.copytree(run, out)
    tl = json.load(open(out + "/timeline.json"))
    ev = [dict(e) for e in tl["predicted"]["events"]]
    mine = sorted([e for e in ev if e["rank"] == 0], key=lambda e: e["start"])[-3:]
    for e in mine:
        e["start"] += LATE
        e["end"] += LATE
    tl["measured"]["events"] = ev
    json.dump(tl, open(out + "/timeline.json", "w"))
    os.remove(out + "/trace.json")  # its memory counters are the real step's
    return out, {(e["rank"], e["stage"], e["mb"], e["op"]) for e in mine}


def key(e):
    return (e["rank"], e["stage"], e["mb"], e["op"])


PANEL = "window.ktWhatIf.panels[%d]"


def open_panel(page, index):
    return open_whatif(page, index, check, "users_browser")


def first_is_prediction(page, k, pred, what):
    """The panel's first simulation against the prediction's events and makespan."""
    got = page.eval("(function(){var s=%s.first.sim;return {ev:s.events,makespan:s.makespan,"
                    "unit:s.time_unit};})()" % (PANEL % k))
    want = {key(e): e for e in pred["events"]}
    ev = got["ev"]
    check(len(ev) == len(want), "%s: %d actions simulated, the prediction has %d" % (what, len(ev), len(want)))
    off = [(key(e), e["start"], want[key(e)]["start"]) for e in ev
           if key(e) not in want or not rel_close(e["start"], want[key(e)]["start"])]
    check(not off, "%s: %d actions start elsewhere than predicted, e.g. %s" % (what, len(off), off[:3]))
    check(rel_close(got["makespan"], pred["makespan"]),
          "%s: makespan %r in the panel, %r predicted" % (what, got["makespan"], pred["makespan"]))


def diff_with_measured(page, k, source, measured, pred, moved_keys, what):
    """Diff mode against the measured step: delta makespan and what moved."""
    page.eval("(function(){var s=%s.box.querySelector('[data-k=\"diff\"]');"
              "for(var i=0;i<s.options.length;i++)if(s.options[i].text===%s)s.value=s.options[i].value;"
              "s.dispatchEvent(new Event('change'));})()" % (PANEL % k, json.dumps(source)))
    page.wait("!%s.box.querySelector('[data-k=\"diffline\"]').hidden" % (PANEL % k), what="diff mode")
    d = page.eval("(function(){var p=%s,b=p.box;function v(k){return +b.querySelector('[data-k=\"'+k+'\"]')"
                  ".textContent;}return {dm:v('dmakespan'),moved:v('moved'),shift:p.shift,"
                  "ev:p.res.sim.events};})()" % (PANEL % k))
    span = max(e["end"] for e in measured["events"]) - min(e["start"] for e in measured["events"])
    # the page says how the what-if differs from the step it is set against
    check(rel_close(d["dm"], pred["makespan"] - span, 1e-3),
          "%s: delta makespan %r, the prediction is %r longer" % (what, d["dm"], pred["makespan"] - span))
    meas = {key(e): e for e in measured["events"]}
    t0 = min(e["start"] for e in measured["events"])
    want_moved = {key(e) for e in pred["events"]
                  if abs(meas[key(e)]["start"] - t0 - e["start"]) > 1e-9}
    if moved_keys is not None:
        check(want_moved == moved_keys, "the edited run moved %s, not %s" % (want_moved, moved_keys))
    check(d["moved"] == len(want_moved),
          "%s: %d of %d actions moved, the measurement moved %d" % (what, d["moved"], len(d["ev"]), len(want_moved)))
    wrong = [(key(e), s) for e, s in zip(d["ev"], d["shift"])
             if s is None or abs(s - (e["start"] - meas[key(e)]["start"] + t0)) > 1e-9]
    check(not wrong, "%s: %d actions shown moved by the wrong amount, e.g. %s" % (what, len(wrong), wrong[:3]))


def clean(page, what, origin=None):
    own = origin or page.eval("location.href").split("#")[0]
    outside = [u for u in page.requests() if not u.split("#")[0].startswith(own)]
    check(not outside, "%s: requests beyond the page: %s" % (what, outside))
    check(not page.errors(), "%s: console errors: %s" % (what, page.errors()))


def runs():
    run = train("vhalf")
    late, moved = late_copy(run, "late")
    return run, late, moved


def part_report(b):
    for run, moved, what in ((r, m, w) for r, m, w in zip(RUNS, (None, MOVED), ("the run", "the edited run"))):
        html = run + ".html"
        subprocess.run([K, "report", run, "-o", html], check=True, stdout=subprocess.DEVNULL)
        tl = json.load(open(run + "/timeline.json"))
        page = b.page(1400, 1600)
        page.goto("file://" + html)
        page.wait("document.body.dataset.kt === 'ready'", what="the run report")
        head = page.eval("(document.getElementById('calibrated')||{}).textContent") or ""
        tf = tl["predicted"]["costs"]["tf"]
        check("costs calibrated on a median step (per stage)" in head and
              head.count(",", head.index("T_F"), head.index("T_B")) == len(tf) - 1,
              "%s: the header says %r" % (what, head))
        k = open_panel(page, 0)
        first_is_prediction(page, k, tl["predicted"], "report of " + what)
        diff_with_measured(page, k, "the measured step", tl["measured"], tl["predicted"], moved,
                           "report of " + what)
        clean(page, "report of " + what)


def start(args, stream="stdout"):
    return start_dashboard(K, args, stream)


def predicted_every_step(page, run, known, what):
    """The bubble chart's predicted line has a point at every step of
    metrics.jsonl, each one of the predictions known, and the latest at or
    before its step."""
    steps = [json.loads(x)["step"] for x in open(run + "/metrics.jsonl") if x.strip()]
    got = page.eval("window.ktDashboard.predictedAt(0)")
    n = page.eval("(document.querySelector('#live-bubble path[data-name=\"predicted\"]')||{dataset:{}}).dataset.n")
    check([p[0] for p in got] == steps and n == str(len(steps)),
          "%s: the predicted bubble at steps %s (path of %s points), metrics.jsonl has %s"
          % (what, [p[0] for p in got], n, steps))
    check(all(any(abs(p[1] - v) <= 1e-9 * abs(v) for v in known) for p in got),
          "%s: predicted bubble %s, the run's predictions %s" % (what, [p[1] for p in got][:5], known))


def part_serve(b):
    for run, moved, what in ((RUNS[0], None, "the run"), (RUNS[1], MOVED, "the edited run")):
        tl = json.load(open(run + "/timeline.json"))
        proc, url = start(["serve", run, "--addr", "0"])
        try:
            page = b.page(1400, 1800)
            page.goto(url)
            page.wait("document.body.dataset.live === 'finished' && "
                      "!!document.querySelector('details.kt-whatif')", timeout=30, what="the dashboard")
            facts = page.eval("document.getElementById('facts-p-0').textContent")
            tf = tl["predicted"]["costs"]["tf"]
            check("costs calibrated on a step, per stage" in facts and
                  facts.count(",", facts.index("T_F"), facts.index("T_B")) == len(tf) - 1,
                  "dashboard of %s: the prediction's header says %r" % (what, facts))
            predicted_every_step(page, run, [100 * tl["predicted"]["bubble_ratio"]], "dashboard of " + what)
            k = open_panel(page, 0)
            first_is_prediction(page, k, tl["predicted"], "dashboard of " + what)
            name = os.path.basename(run)
            diff_with_measured(page, k, "run %s: measured step" % name, tl["measured"], tl["predicted"],
                               moved, "dashboard of " + what)
            clean(page, "dashboard of " + what, url)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)


def part_live(b):
    proc, url = start(["train"] + RUN + ["--steps", "12", "--run-dir", TMP + "/live", "--serve", "0"],
                      stream="stderr")
    try:
        page = b.page(1400, 1800)
        page.goto(url)
        page.wait("document.body.dataset.live === 'finished' && "
                  "!!document.querySelector('details.kt-whatif')", timeout=120, what="the live run's end")
        page.b.pump(0.6)
        pred = page.eval("(function(){var t=window.ktDashboard.run(0).tl;return {events:t.predicted.events,"
                         "makespan:t.predicted.makespan,costs:t.costs};})()")
        check(pred["costs"] and isinstance(pred["costs"].get("tf"), list),
              "the live prediction's costs reach the page per stage: %r" % (pred["costs"],))
        rendered = page.eval("window.ktDashboard.run(0).predicted")
        predicted_every_step(page, TMP + "/live", [p[1] for p in rendered], "train --serve")
        at = page.eval("window.ktDashboard.predictedAt(0)")
        check(all(p[1] == max((q for q in rendered if q[0] <= p[0]), default=rendered[0],
                              key=lambda q: q[0])[1] for p in at),
              "train --serve: a step's predicted bubble is not the latest rendered one before it")
        k = open_panel(page, 0)
        first_is_prediction(page, k, pred, "train --serve")
        clean(page, "train --serve", url)
    finally:
        check(proc.wait(timeout=60) == 0, "train --serve failed")


def last_peak(run):
    lines = [json.loads(x) for x in open(run + "/metrics.jsonl") if x.strip()]
    return max(r["peak_act_bytes"] for r in lines[-1]["ranks"])


def part_memory(b):
    small = ["--model", "gpt", "--layers", "8", "--stages", "4", "-m", "16", "-b", "2", "--no-live",
             "--steps", "3"]
    runs = {}
    for name, extra in (("zba", ["--schedule", "zb-auto", "--mem-limit", "0.5x"]), ("one", ["--schedule", "1f1b"])):
        runs[name] = TMP + "/" + name
        subprocess.run([K, "train"] + small + extra + ["--run-dir", runs[name]], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seg = json.load(open(runs["zba"] + "/config.json"))["segments"][-1]
    check(seg.get("peak_1f1b_bytes", 0) > 0 and seg.get("mem_limit") == "0.5x" and
          abs(seg.get("mem_limit_bytes", 0) - 0.5 * seg["peak_1f1b_bytes"]) < 1 and
          len(seg.get("mem_act_bytes", [])) == 4 and seg.get("period_1f1b", 0) > 0,
          "config.json's segment: %s" % {k: seg.get(k) for k in ("peak_1f1b_bytes", "mem_limit",
                                                                    "mem_limit_bytes", "period_1f1b")})
    peak = last_peak(runs["zba"])
    ratio = peak / seg["peak_1f1b_bytes"]
    price = seg["predicted_period"] / seg["period_1f1b"]
    # the run report
    html = runs["zba"] + ".html"
    subprocess.run([K, "report", runs["zba"], "-o", html], check=True, stdout=subprocess.DEVNULL)
    page = b.page(1400, 1600)
    page.goto("file://" + html)
    page.wait("document.body.dataset.kt === 'ready'", what="the run report")
    note = page.eval("(document.getElementById('memory-summary')||{}).textContent") or ""
    check(("%.3fx 1F1B" % ratio) in note.replace("x 1F1B's", "x 1F1B") and "--mem-limit 0.5x" in note
          and ("%.3fx" % price) in note, "the report's memory note: %r (want %.3fx, price %.3fx)" % (note, ratio, price))
    for chart in ("memory-step", "chart-memory"):
        legend = page.eval("Array.from(document.querySelectorAll('#%s text')).map(function(t){"
                           "return t.textContent;}).join('|')" % chart) or ""
        check("1F1B's predicted peak" in legend and "--mem-limit 0.5x" in legend,
              "the report's %s chart draws no 1F1B peak or limit: %r" % (chart, legend[:200]))
    act = page.eval("(document.querySelector('#memory-per-stage [data-act]')||{dataset:{}}).dataset.act")
    check(act is not None and [float(x) for x in act.split(",")] == seg["mem_act_bytes"],
          "the report's memory per stage: %r, config.json %r" % (act, seg["mem_act_bytes"]))
    clean(page, "run report's memory")
    # kaiten serve of both
    proc, url = start(["serve", runs["zba"], runs["one"], "--addr", "0"])
    try:
        page = b.page(1400, 2400)
        page.goto(url)
        page.wait("document.body.dataset.live === 'finished' && !!document.querySelector('#live-peaks')",
                  timeout=30, what="the dashboard")
        page.b.pump(0.6)
        bars = page.eval("Array.from(document.querySelectorAll('#live-peaks rect[data-bar]')).map("
                         "function(r){return +r.dataset.value;})")
        want = [last_peak(runs["zba"]), last_peak(runs["one"])]
        check(bars == want, "peaks side by side: %s, metrics.jsonl says %s" % (bars, want))
        row = page.eval("document.querySelector('#now tr:nth-child(2)').textContent")
        check(("(%.3fx 1F1B)" % ratio) in row or ("(%sx 1F1B)" % ("%.3g" % ratio)) in row,
              "the Now table's row: %r (peak %.3fx 1F1B's)" % (row, ratio))
        check(("%.3g" % price) in row, "the Now table's price: %r (want %.3g)" % (row, price))
        facts = page.eval("(function(){var m=document.querySelector('#now tr.stage-facts[data-run=\"0\"] "
                          ".stage-memory'),c=document.querySelector('#now tr.stage-facts[data-run=\"0\"] "
                          ".stage-costs');return [m&&m.dataset.stageWgradBytes,c&&c.textContent];})()")
        tl0 = json.load(open(runs["zba"] + "/timeline.json"))["predicted"]["costs"]
        check(facts[0] is not None and [float(x) for x in facts[0].split(",")] == seg["mem_wgrad_bytes"],
              "the Now table's memory per stage: %r, config.json %r" % (facts[0], seg["mem_wgrad_bytes"]))
        check(facts[1] is not None and facts[1].count(",", facts[1].index("T_F"), facts[1].index("T_B"))
              == len(tl0["tf"]) - 1, "the Now table's calibrated costs: %r" % (facts[1],))
        marks = page.eval("Array.from(document.querySelectorAll('#live-mem-0 line[data-mark]')).map("
                          "function(l){return [l.dataset.mark, +l.dataset.value];})")
        check(sorted(marks) == sorted([["mem-limit", seg["mem_limit_bytes"]], ["peak-1f1b", seg["peak_1f1b_bytes"]]]),
              "the memory chart's marks: %s" % marks)
        clean(page, "dashboard's memory", url)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    # train --serve: the live run's chart marks what config.json says
    proc, url = start(["train"] + small[:-2] + ["--steps", "8", "--schedule", "zb-auto", "--mem-limit", "0.5x",
                                                 "--run-dir", TMP + "/livemem", "--serve", "0"], stream="stderr")
    try:
        page = b.page(1400, 2000)
        page.goto(url)
        page.wait("document.body.dataset.live === 'finished' && !!document.querySelector('#live-mem-0')",
                  timeout=120, what="the live run's end")
        page.b.pump(0.6)
        seg = json.load(open(TMP + "/livemem/config.json"))["segments"][-1]
        marks = page.eval("Array.from(document.querySelectorAll('#live-mem-0 line[data-mark]')).map("
                          "function(l){return [l.dataset.mark, +l.dataset.value];})")
        check(sorted(marks) == sorted([["mem-limit", seg["mem_limit_bytes"]], ["peak-1f1b", seg["peak_1f1b_bytes"]]]),
              "train --serve's memory chart marks: %s" % marks)
        clean(page, "train --serve's memory", url)
    finally:
        check(proc.wait(timeout=60) == 0, "train --serve failed")


LEGIBLE = """(function(id){var s=document.getElementById(id);if(!s)return null;
  function box(e){var r=e.getBoundingClientRect();return [r.left,r.top,r.right,r.bottom];}
  function cut(a,c){return Math.max(0,Math.min(a[2],c[2])-Math.max(a[0],c[0]))*
                           Math.max(0,Math.min(a[3],c[3])-Math.max(a[1],c[1]));}
  var t=Array.from(s.querySelectorAll('g.labels text')).map(box);
  var bars=Array.from(s.querySelectorAll('rect[data-op]:not([data-pred])')).map(box);
  var marks=Array.from(s.querySelectorAll('.kt-wi-crit')).map(box);
  var lab=0,cov=0,i,j;
  for(i=0;i<t.length;i++)for(j=i+1;j<t.length;j++)if(cut(t[i],t[j])>0.25)lab++;
  for(i=0;i<marks.length;i++)for(j=0;j<bars.length;j++)if(cut(marks[i],bars[j])>0.25)cov++;
  return {labels:t.length,overlapping:lab,bars:bars.length,marks:marks.length,covering:cov};})"""


def legible(page, svg_id, what, shot):
    """No two labels overlap, no critical-path mark covers a bar; the chart
    as a screenshot in TMP."""
    page.eval("document.getElementById('%s').scrollIntoView({block:'center'})" % svg_id)
    got = page.eval("%s('%s')" % (LEGIBLE, svg_id))
    check(got is not None and got["overlapping"] == 0,
          "%s: labels %s" % (what, got))
    check(got is not None and got["marks"] > 0 and got["covering"] == 0,
          "%s: the critical path's marks cover bars: %s" % (what, got))
    with open(shot, "wb") as f:
        f.write(page.screenshot(clip=page.rect("#" + svg_id)))


def part_gantt(b):
    for p, v, m in ((4, 2, 16), (8, 2, 32)):
        run = "%s/gantt%d" % (TMP, p)
        subprocess.run([K, "train", "--synthetic", "--stages", str(p), "--schedule", "v-half", "-m", str(m),
                        "--steps", "2", "--no-live", "--run-dir", run], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([K, "report", run, "-o", run + ".html"], check=True, stdout=subprocess.DEVNULL)
        what = "P=%d V=%d M=%d" % (p, v, m)
        page = b.page(1400, 1600)
        page.goto("file://" + run + ".html")
        page.wait("document.body.dataset.kt === 'ready' && !!document.querySelector('#gantt-step .kt-wi-crit')",
                  what="the run report's critical path")
        legible(page, "gantt-step", "report, " + what, run + "-report.png")
        clean(page, "report, " + what)
        proc, url = start(["serve", run, "--addr", "0"])
        try:
            page = b.page(1400, 1800)
            page.goto(url)
            page.wait("document.body.dataset.live === 'finished' && "
                      "!!document.querySelector('#gantt-m-0 svg .kt-wi-crit')", timeout=30, what="the dashboard")
            sid = page.eval("(function(){var s=document.querySelector('#gantt-m-0 svg');"
                            "s.id=s.id||'kt-test-measured';return s.id;})()")
            legible(page, sid, "dashboard, " + what, run + "-serve.png")
            clean(page, "dashboard, " + what, url)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)


RUNS, MOVED = None, None
with Browser(CHROMIUM) as browser:
    if PART in ("report", "serve"):
        r, late, MOVED = runs()
        RUNS = (r, late)
    {"report": part_report, "serve": part_serve, "live": part_live, "memory": part_memory,
     "gantt": part_gantt}[PART](browser)
sys.exit(check.summary("test_users_" + PART))
