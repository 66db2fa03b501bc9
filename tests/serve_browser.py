"""Browser checks of the live dashboard and the conveyor-belt replay
(run by test_serve_browser.sh): usage  serve_browser.py KAITEN CHROMIUM TMPDIR

1. kaiten train --serve: Chromium loads the page while the run trains; two
   screenshots of the loss chart seconds apart differ (and so does its
   curve); the replay plays on the live chart; the page ends in its final
   state with every step; no console errors; no request leaves the server.
2. kaiten serve of the finished run (a late client: history from the
   files), and of two runs (their curves overlay).
3. The replay in the HTML reports (sim, compare, run), loaded with the
   network switched off: at a cursor time the highlighted actions, the
   plates in flight per rank and the bubble so far match what the
   simulation's events say.
"""
import json
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from cdp import Browser, start_dashboard  # noqa: E402
import ktserve  # noqa: E402
from ktserve import check  # noqa: E402

K, CHROMIUM, TMP = sys.argv[1:4]
# instrumented builds (make asan) train slower: fewer steps last as long
STEPS = 60 if __import__("os").environ.get("KT_SANITIZED") == "1" else 150


def start(args):
    """Starts a kaiten command that prints its dashboard address; returns (proc, url)."""
    return start_dashboard(K, args, "stdout" if args[0] == "serve" else "stderr", 30)


def steps(page):
    return int(page.eval("+(document.body.dataset.steps || 0)"))


def only_local(page, origin, what):
    outside = [u for u in page.requests() if not u.startswith(origin)]
    check(not outside, "%s: requests outside the server: %s" % (what, outside))
    errs = page.errors()
    check(not errs, "%s: console errors: %s" % (what, errs))


LOSS_PATH = "(function(){var p=document.querySelector('#live-loss path[data-series=\"0\"]');" \
            "return p ? p.getAttribute('d') : '';})()"


def live(b):
    run = TMP + "/run"
    n = STEPS
    proc, url = start(["train", "--stages", "2", "-m", "4", "-b", "4", "--steps", str(n),
                       "--val-every", "25", "--run-dir", run, "--no-live", "--serve", "0"])
    page = b.page(1400, 2000)
    page.goto(url)
    page.wait("document.body.dataset.live === 'live' && +document.body.dataset.steps >= 3 && "
              "!!document.querySelector('#gantt-m-0 svg.gantt')", timeout=60,
              what="the live page with steps and a Gantt")
    clip = page.rect("#chart-loss")
    first, d1, s1 = page.screenshot(clip=clip), page.eval(LOSS_PATH), steps(page)
    time.sleep(3)
    page.wait("+document.body.dataset.steps >= %d" % (s1 + 5), timeout=60)
    page.b.pump(0.6)  # a redraw
    second, d2, s2 = page.screenshot(clip=page.rect("#chart-loss")), page.eval(LOSS_PATH), steps(page)
    open(TMP + "/live-1.png", "wb").write(first)
    open(TMP + "/live-2.png", "wb").write(second)
    check(first != second, "the loss chart looks the same at steps %d and %d" % (s1, s2))
    check(d1 != d2 and len(d2) > len(d1), "the loss curve did not grow (%d -> %d steps)" % (s1, s2))
    # the replay on the live chart (a new step's Gantt may replace the chart
    # under the replay: a few tries)
    for _ in range(3):
        page.eval("(function(){var b=document.querySelector('.kt-controls button[title^=\"play\"]');"
                  "if (b) b.click();})()")  # not while it plays
        time.sleep(0.8)
        t = page.eval("document.querySelector('#step-0 .kt-read').textContent")
        m = re.match(r"t = ([0-9.e+-]+)", t or "")
        lit = page.eval("document.querySelectorAll('#gantt-m-0 rect.kt-now').length")
        if m and float(m.group(1)) > 0 and lit >= 1:
            break
    check(m and float(m.group(1)) > 0, "the replay did not move: %r" % t)
    check(lit >= 1, "no action highlighted during the replay")
    page.eval("document.querySelector('.kt-controls button[title^=\"play\"]').click()")
    page.wait("document.body.dataset.live === 'finished'", timeout=240, what="the final state")
    page.b.pump(0.6)
    check(steps(page) == n, "the page has %d of %d steps" % (steps(page), n))
    state = page.eval("document.querySelector('#now td:last-child').textContent")
    check(state == "finished", "the run's state reads %r" % state)
    check(proc.wait(timeout=60) == 0, "train --serve failed: %s" % proc.stderr.read())
    open(TMP + "/live-final.png", "wb").write(page.screenshot())
    only_local(page, url, "live page")
    return run


def served(b, dirs, what):
    proc, url = start(["serve"] + dirs + ["--addr", "0"])
    try:
        page = b.page(1400, 1600)
        page.goto(url)
        page.wait("document.body.dataset.live === 'finished' && "
                  "!!document.querySelector('#gantt-m-0 svg.gantt')", timeout=30, what=what)
        page.b.pump(0.6)
        only_local(page, url, what)
        return page
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=10) == 0, "kaiten serve did not stop cleanly on SIGTERM")


def idle_chart(page, run):
    """The shown step's "why idle": a stacked bar per rank whose parts are
    that step's ranks[].idle_causes in metrics.jsonl."""
    title = page.eval("(function(){var t=document.querySelector('#live-idle-0 text');"
                      "return t ? t.textContent : '';})()")
    m = re.search(r"step (\d+)", title or "")
    check(m, "no 'Why idle' chart: %r" % title)
    if not m:
        return
    recs = {json.loads(l)["step"]: json.loads(l) for l in open(run + "/metrics.jsonl")}
    want = recs[int(m.group(1))]["ranks"]
    got = page.eval("Array.from(document.querySelectorAll('#live-idle-0 rect[data-part]')).map("
                    "function(r){return [r.getAttribute('data-part'), +r.getAttribute('data-value')];})")
    names = ["compute", "schedule", "core_wait", "comm", "overhead", "optimizer"]
    check(len(got) == 6 * len(want), "%d parts for %d ranks" % (len(got), len(want)))
    for k, r in enumerate(want):
        for j, n in enumerate(names):
            g = got[6 * k + j] if 6 * k + j < len(got) else [None, 0]
            check(g[0] == n and abs(g[1] - r["idle_causes"][n]) <= 1e-12 + 1e-9 * abs(g[1]),
                  "rank %d's %s: the bar says %s, metrics.jsonl %s" % (k, n, g, r["idle_causes"][n]))


def serve_runs(b, run):
    page = served(b, [run], "serve of the finished run")
    check(steps(page) == STEPS, "a late client got %d of %d steps" % (steps(page), STEPS))
    idle_chart(page, run)
    other = TMP + "/zb"
    subprocess.run([K, "train", "--stages", "2", "-m", "4", "-b", "4", "--steps", "20",
                    "--schedule", "zb-h1", "--run-dir", other, "--no-live"], check=True,
                   stdout=subprocess.DEVNULL)
    page = served(b, [run, other], "serve of two runs")
    colours = page.eval("Array.from(document.querySelectorAll('#live-loss path[data-series]'))"
                        ".map(function(p){return p.getAttribute('stroke');})")
    check(len(set(colours)) >= 2, "two runs, loss curves in colours %s" % colours)
    check(page.eval("document.querySelectorAll('#now tr:not(.stage-facts)').length") == 3, "two runs in the table")
    open(TMP + "/overlay.png", "wb").write(page.screenshot())


def expected(events, t):
    """What the replay should show at time t: running (rank, op, mb), plates
    in flight per rank, and the bubble so far."""
    running, busy, recs = set(), 0.0, {}
    P = 1 + max(e["rank"] for e in events)
    for e in events:
        if e["start"] <= t < e["end"]:
            running.add((e["rank"], e["op"], e["mb"]))
        if e["start"] < t:
            busy += min(e["end"], t) - e["start"]
        r = recs.setdefault((e["stage"], e["mb"]), {"done": None})
        if e["op"] == "F":
            r["F"] = e
        elif r["done"] is None or e["end"] > r["done"]:
            r["done"] = e["end"]
    held = [0] * P
    for r in recs.values():
        if "F" in r and r["F"]["start"] <= t and not (r["done"] is not None and r["done"] <= t):
            held[r["F"]["rank"]] += 1
    return running, held, 1 - busy / (P * t)


def report_replay(b):
    sim = subprocess.run([K, "sim", "--schedule", "zb-h1", "-p", "4", "-m", "8", "--format",
                          "json", "--report", TMP + "/sim.html"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    events = json.loads(sim)["events"]
    span = max(e["end"] for e in events)
    page = b.page(1400, 1000)
    page.call("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                   "downloadThroughput": -1,
                                                   "uploadThroughput": -1})
    page.goto("file://" + TMP + "/sim.html")
    page.wait("document.body.dataset.kt === 'ready'", what="the sim report (offline)")
    check(page.eval("document.querySelectorAll('.kt-belt').length") == 1, "one replay per Gantt")
    for value in (130, 420, 777):
        t = span * value / 1000
        page.eval("(function(){var s=document.querySelector('.kt-controls input');s.value=%d;"
                  "s.dispatchEvent(new Event('input'));})()" % value)
        got = page.eval("Array.from(document.querySelectorAll('rect.kt-now')).map(function(r){"
                        "return [+r.dataset.rank, r.dataset.op, +r.dataset.mb];})")
        running, held, bubble = expected(events, t)
        check({tuple(g) for g in got} == running,
              "t=%g: highlighted %s, running %s" % (t, sorted(map(tuple, got)), sorted(running)))
        plates = page.eval("Array.from(document.querySelectorAll('.kt-belt-panel text'))"
                           ".map(function(x){return x.textContent;})"
                           ".filter(function(s){return / in flight/.test(s);})")
        counts = [int(s.split()[0]) for s in plates]
        check(counts == held, "t=%g: plates in flight %s, want %s" % (t, counts, held))
        text = page.eval("document.querySelector('.kt-read').textContent")
        m = re.search(r"bubble so far ([0-9.]+)%", text)
        check(m and abs(float(m.group(1)) - 100 * bubble) < 0.3,
              "t=%g: %r, bubble so far %.2f%%" % (t, text, 100 * bubble))
    open(TMP + "/sim-replay.png", "wb").write(page.screenshot())
    only_local(page, "file://", "sim report")
    subprocess.run([K, "compare", "-p", "4", "-m", "8", "--report", TMP + "/cmp.html"],
                   check=True, stdout=subprocess.DEVNULL)
    page = b.page(1400, 1000)
    page.goto("file://" + TMP + "/cmp.html")
    page.wait("document.body.dataset.kt === 'ready'", what="the compare report")
    gantts = page.eval("document.querySelectorAll('svg.gantt[data-mode=\"detail\"]').length")
    belts = page.eval("document.querySelectorAll('.kt-belt').length")
    check(gantts >= 5 and belts == gantts, "%d replays for %d Gantts" % (belts, gantts))
    page.eval("document.querySelector('.kt-controls button[title^=\"play\"]').click()")
    time.sleep(0.5)
    t = page.eval("document.querySelector('.kt-read').textContent")
    check(re.match(r"t = [0-9.]*[1-9]", t or ""), "the compare report's replay: %r" % t)
    only_local(page, "file://", "compare report")


def run_report(b, run):
    subprocess.run([K, "report", run, "-o", TMP + "/run.html"], check=True,
                   stdout=subprocess.DEVNULL)
    page = b.page(1400, 1200)
    page.goto("file://" + TMP + "/run.html")
    page.wait("document.body.dataset.kt === 'ready'", what="the run report")
    check(page.eval("!!document.querySelector('#gantt-step').parentNode.previousElementSibling"
                    ".classList.contains('kt-belt')"), "no replay above the traced step")
    page.eval("(function(){var s=document.querySelector('.kt-controls input');s.value=500;"
              "s.dispatchEvent(new Event('input'));})()")
    mem = page.eval("Array.from(document.querySelectorAll('.kt-belt-panel text'))"
                    ".map(function(x){return x.textContent;})"
                    ".filter(function(s){return / in flight/.test(s);})")
    check(mem and all(re.search(r"\d (B|KiB|MiB|GiB)$", s) for s in mem),
          "the run report's replay shows no memory in bytes: %s" % mem)
    only_local(page, "file://", "run report")


with Browser(CHROMIUM) as browser:
    report_replay(browser)
    run = live(browser)
    serve_runs(browser, run)
    run_report(browser, run)
ktserve.finish("test_serve_browser")
