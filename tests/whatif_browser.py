"""The what-if panel in headless Chromium (run by browser_part.sh, one
CTest entry per part):  whatif_browser.py PART KAITEN CHROMIUM TMPDIR

Each part drives a report the CLI wrote (or the dashboard) as a user
would, then checks the page's numbers against `kaiten sim` on the same
inputs (makespans equal to 1e-9), that the page raised no error and that
it requested nothing but itself:

  panel     sliders (a stage's T_F, the link, a straggler, the op overhead,
            M) and the schedule picker (zb-auto under 0.5x); the command
            the page shows; the dashboard's panel
  critical  the critical path and a clicked action's start, end and slack
            (checked by an independent replay), and the measured step's
  drag      drags into an invalid place (order, deadlock: the blocking
            ranks named and outlined; the memory limit) and a valid one;
            the exports read back by kaiten validate and sim --from
  diff      two schedules of a comparison on one axis: delta makespan,
            delta peak memory, how far each action moved
  idle      why idle: structural bubble and imbalance per rank; the
            measured causes when a run records them, nothing when not
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cdp import Browser, Tally, open_whatif  # noqa: E402

PART, K, CHROMIUM, TMP = sys.argv[1:5]
check = Tally()


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def sim(*args):
    out = subprocess.run([K, "sim", "--format", "json"] + list(args), check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def train(name, steps, html=None):
    """A short training run on 2 stages (and its report); returns its directory."""
    run = TMP + "/" + name
    subprocess.run([K, "train", "--stages", "2", "-m", "4", "-b", "4", "--steps", str(steps), "--run-dir",
                    run, "--no-live"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if html:
        subprocess.run([K, "report", run, "-o", html], check=True, stdout=subprocess.DEVNULL)
    return run


def report(path, *args, cmd="sim"):
    subprocess.run([K, cmd] + list(args) + ["--report", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


PANEL = "window.ktWhatIf.panels[%d]"


def open_panel(page, index=0, url=None):
    if url:
        page.goto(url)
        page.wait("document.body.dataset.kt === 'ready'", what="the page")
    return open_whatif(page, index, check, "whatif_browser")


def answer(page, k=0):
    """What the panel shows: its last answer's figures."""
    return page.eval("(function(){var r=%s.res,s=r.sim;return {makespan:s.makespan,"
                     "bubble:s.bubble_ratio,closed:s.closed_form_bubble,peaks:s.ranks.map("
                     "function(x){return x.peak_memory;}),busy:s.ranks.map(function(x){return x.busy;}),"
                     "command:r.command,limit:r.mem_limit,shown:+%s.host.dataset.makespan,"
                     "state:%s.host.dataset.state,runs:+%s.host.dataset.runs};})()"
                     % (PANEL % k, PANEL % k, PANEL % k, PANEL % k))


def setting(page, k, key, value):
    """Moves a slider (range or number input) or picks an option, as a user
    would, and waits for the panel to answer."""
    runs = answer(page, k)["runs"]
    page.eval("(function(){var el=%s.box.querySelector('[data-k=\"%s\"]');el.value=%s;"
              "if(el.tagName!=='SELECT'&&el.type!=='text')el.dispatchEvent(new Event('input'));"
              "el.dispatchEvent(new Event('change'));})()" % (PANEL % k, key, json.dumps(str(value))))
    if key == "stage":
        return
    # answered, and by the full search once the slider is let go
    page.wait("+%s.host.dataset.runs > %d && !%s.pending && %s.host.dataset.quick !== '1'"
              % (PANEL % k, runs, PANEL % k, PANEL % k), what="an answer to " + key)


def same_as_cli(page, k, cli_args, what, closed=False):
    a, want = answer(page, k), sim(*cli_args)
    if not close(a["makespan"], want["makespan"]): print("page command:", a["command"], file=sys.stderr)
    check(close(a["makespan"], want["makespan"]),
          "%s: makespan %r in the page, %r from kaiten sim %s" % (what, a["makespan"], want["makespan"],
                                                                 " ".join(cli_args)))
    check(close(a["shown"], want["makespan"]), "%s: the page shows %r" % (what, a["shown"]))
    check(close(a["bubble"], want["bubble_ratio"]), "%s: bubble %r vs %r" % (what, a["bubble"],
                                                                          want["bubble_ratio"]))
    peaks = [r["peak_memory"] for r in want["ranks"]]
    check(all(close(x, y) for x, y in zip(a["peaks"], peaks)) and len(a["peaks"]) == len(peaks),
          "%s: peak memory per rank %s vs %s" % (what, a["peaks"], peaks))
    if closed:
        check(want["closed_form_bubble"] is not None and close(a["closed"], want["closed_form_bubble"]),
              "%s: closed form %r vs %r" % (what, a["closed"], want["closed_form_bubble"]))
    # the flags the page shows reproduce it too
    again = sim(*shlex.split(a["command"]))
    check(close(again["makespan"], a["makespan"]), "%s: the page's command gives %r" % (what, again["makespan"]))
    return a, want


def clean(page, what):
    own = page.eval("location.href").split("#")[0]
    outside = [u for u in page.requests() if u.split("#")[0] != own]
    check(not outside, "%s: requests beyond the page itself: %s" % (what, outside))
    errs = page.errors()
    check(not errs, "%s: console errors: %s" % (what, errs))


# ---- 2. the panel -----------------------------------------------------------

def part_panel(b):
    url = "file://" + report(TMP + "/zbh1.html", "--schedule", "zb-h1", "-p", "4", "-m", "8")
    page = b.page(1400, 1400)
    page.call("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                   "downloadThroughput": -1, "uploadThroughput": -1})
    k = open_panel(page, 0, url)
    base = ["--schedule", "zb-h1", "-p", "4"]
    same_as_cli(page, k, base + ["-m", "8"], "as generated", closed=True)
    setting(page, k, "stage", 2)
    setting(page, k, "tf", 1.5)
    same_as_cli(page, k, base + ["-m", "8", "--tf", "1,1,1.5,1"], "stage 2's T_F 1.5")
    setting(page, k, "bytes", 10)
    setting(page, k, "lat", 0.25)
    setting(page, k, "bw", 50)  # 10^(50/12.5 - 2) = 100 bytes per unit: a hop of 0.35
    link = ["--comm-latency", "0.25", "--comm-bytes", "10", "--comm-bandwidth", "100"]
    same_as_cli(page, k, base + ["-m", "8", "--tf", "1,1,1.5,1"] + link, "the link")
    setting(page, k, "slow", 1)
    setting(page, k, "slowF", 2)
    slow = ["--tf", "1,2,1.5,1", "--tb", "1,2,1,1", "--tw", "1,2,1,1"]
    same_as_cli(page, k, base + ["-m", "8"] + slow + link, "rank 1 twice as slow")
    setting(page, k, "opOv", 0.1)
    same_as_cli(page, k, base + ["-m", "8"] + slow + link + ["--op-overhead", "0.1"], "op overhead")
    setting(page, k, "m", 12)
    same_as_cli(page, k, base + ["-m", "12"] + slow + link + ["--op-overhead", "0.1"], "M=12")
    # the schedule picker: zb-auto under half of 1F1B's memory (4 stages: the
    # per-stage values stay)
    setting(page, k, "limit", "0.5x")
    setting(page, k, "schedule", "zb-auto")
    a, want = same_as_cli(page, k, ["--schedule", "zb-auto", "-p", "4", "-m", "12", "--mem-limit", "0.5x",
                                    "--op-overhead", "0.1"] + slow + link, "zb-auto under 0.5x")
    # zbv: 8 stages, every stage as given (1/V of the rank's costs), the straggler kept
    setting(page, k, "schedule", "zbv")
    same_as_cli(page, k, ["--schedule", "zbv", "-p", "4", "-m", "12", "--per-stage", "--tf", "0.5,1,0.5,0.5,0.5,0.5,1,0.5",
                          "--tb", "0.5,1,0.5,0.5,0.5,0.5,1,0.5", "--tw", "0.5,1,0.5,0.5,0.5,0.5,1,0.5",
                          "--mem-act", "0.5", "--op-overhead", "0.1"] + link, "zbv")
    # a slider moving: zbv (tuned to these unequal costs) answers from its
    # quick search; let go, from the full search, kaiten sim's
    setting(page, k, "stage", -1)  # every stage
    runs = answer(page, k)["runs"]
    page.eval("(function(){var el=%s.box.querySelector('[data-k=\"tw\"]');el.value='1.25';"
              "el.dispatchEvent(new Event('input'));})()" % (PANEL % k))
    page.wait("+%s.host.dataset.runs > %d && !%s.pending" % (PANEL % k, runs, PANEL % k), what="a moving slider")
    check(page.eval("%s.host.dataset.quick" % (PANEL % k)) == "1", "zbv did not answer a moving slider quickly")
    page.eval("%s.box.querySelector('[data-k=\"tw\"]').dispatchEvent(new Event('change'))" % (PANEL % k))
    page.wait("!%s.pending && %s.host.dataset.quick === '0'" % (PANEL % k, PANEL % k), what="the full search")
    tw = "0.625,1.25,0.625,0.625,0.625,0.625,1.25,0.625"
    same_as_cli(page, k, ["--schedule", "zbv", "-p", "4", "-m", "12", "--per-stage", "--tf", "0.5,1,0.5,0.5,0.5,0.5,1,0.5",
                          "--tb", "0.5,1,0.5,0.5,0.5,0.5,1,0.5", "--tw", tw,
                          "--mem-act", "0.5", "--op-overhead", "0.1"] + link, "zbv, T_W let go at 1.25")
    setting(page, k, "schedule", "zb-auto")
    check(close(a["limit"], 2.0) and max(a["peaks"]) <= a["limit"] + 1e-9,
          "zb-auto: limit %r, peaks %s" % (a["limit"], a["peaks"]))
    ms = page.eval("+%s.host.dataset.ms" % (PANEL % k))
    check(ms > 0, "the panel records how long a change took (%r ms)" % ms)
    page.call("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                   "downloadThroughput": -1, "uploadThroughput": -1})
    clean(page, "sim report")
    dashboard(b)


def dashboard(b):
    """kaiten serve of a finished run: the panel under the prediction."""
    run = train("run", 6)
    proc = subprocess.Popen([K, "serve", run, "--addr", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for _ in range(100):
            m = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
            if m:
                url = m.group(0)
                break
        page = b.page(1400, 1600)
        page.goto(url)
        page.wait("!!document.querySelector('details.kt-whatif')", timeout=30, what="the dashboard's panel")
        k = open_panel(page, 0)
        a = answer(page, k)
        again = sim(*shlex.split(a["command"]))
        check(close(again["makespan"], a["makespan"]), "dashboard: %r in the page, %r from kaiten sim %s"
              % (a["makespan"], again["makespan"], a["command"]))
        check(page.eval("!!document.querySelector('#gantt-m-0 g.kt-wi-measured rect')"),
              "dashboard: no critical path on the measured step")
        setting(page, k, "m", 8)
        a = answer(page, k)
        check(a["state"] == "ready" and close(sim(*a["command"].split())["makespan"], a["makespan"]),
              "dashboard: M=8 answer %r" % a)
        outside = [u for u in page.requests() if not u.startswith(url)]
        check(not outside, "dashboard: requests outside the server: %s" % outside)
        check(not page.errors(), "dashboard: console errors: %s" % page.errors())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


# ---- 3. the critical path ----------------------------------------------------

def replay(ev, hop, delayed=None, delay=0.0):
    """The simulator's rules for a compute-only timeline without overlapped
    pairs: each action starts when its rank's previous one ended and its
    input arrived (hop later across ranks). Returns the end."""
    by = {(e["stage"], e["mb"], e["op"]): e for e in ev}
    S = 1 + max(e["stage"] for e in ev)

    def maker(e):
        if e["op"] == "F":
            return by.get((e["stage"] - 1, e["mb"], "F"))
        if e["op"] == "W":
            return by.get((e["stage"], e["mb"], "I"))
        if e["stage"] == S - 1:
            return by.get((e["stage"], e["mb"], "F"))
        return by.get((e["stage"] + 1, e["mb"], "B")) or by.get((e["stage"] + 1, e["mb"], "I"))

    end, last, new_end = 0.0, {}, {}
    for i, e in sorted(enumerate(ev), key=lambda x: (x[1]["start"], x[0])):
        t = last.get(e["rank"], 0.0)
        q = maker(e)
        if q is not None:
            t = max(t, new_end[id(q)] + (hop if q["rank"] != e["rank"] else 0))
        if i == delayed:
            t += delay
        new_end[id(e)] = t + e["end"] - e["start"]
        last[e["rank"]] = new_end[id(e)]
        end = max(end, new_end[id(e)])
    return end


def click(page, x, y):
    for kind in ("mousePressed", "mouseReleased"):
        page.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                               "clickCount": 1})


def bar_center(page, k, i):
    return page.eval("(function(){var p=%s;p.chart.el.scrollIntoView({block:'center'});"
                     "var b=window.ktWhatIf.barBox(p,%d);return [b.x+b.w/2,b.y+b.h/2,b.w];})()" % (PANEL % k, i))


def part_critical(b):
    cli = ["--schedule", "1f1b", "-p", "4", "-m", "6", "--tf", "1,1.5,1,1", "--tb", "2", "--tw", "0",
           "--comm", "0.5"]
    url = "file://" + report(TMP + "/crit.html", *cli)
    want = sim(*cli)
    page = b.page(1400, 1400)
    k = open_panel(page, 0, url)
    got = page.eval("(function(){var r=%s.res;return {ev:r.sim.events,path:r.path,slack:r.slack};})()"
                    % (PANEL % k))
    ev, path = got["ev"], got["path"]
    key = lambda e: (e["rank"], e["stage"], e["op"], e["mb"])  # noqa: E731
    cli_ev = {key(e): e for e in want["events"]}
    check(all(close(e["start"], cli_ev[key(e)]["start"]) and close(e["end"], cli_ev[key(e)]["end"])
              for e in ev), "the panel's events differ from kaiten sim's")
    end = max(e["end"] for e in want["events"])
    check(close(ev[path[0]]["start"], 0) and close(ev[path[-1]]["end"], end),
          "the path runs %r..%r, the step 0..%r" % (ev[path[0]]["start"], ev[path[-1]]["end"], end))
    hops = 0
    for a, c in zip(path, path[1:]):
        ea, ec = cli_ev[key(ev[a])], cli_ev[key(ev[c])]
        gap = 0.5 if ea["rank"] != ec["rank"] else 0
        hops += ea["rank"] != ec["rank"]
        check(close(ec["start"], ea["end"] + gap), "path step %s -> %s is not binding" % (key(ea), key(ec)))
        check(close(replay(ev, 0.5, a, 0.25), end + 0.25), "delaying %s does not delay the step" % (key(ea),))
    arrows = page.eval("%s.chart.svg.querySelectorAll('.kt-wi-head').length" % (PANEL % k))
    check(arrows == hops, "%d arrows for %d hand-overs on the path" % (arrows, hops))
    check(close(replay(ev, 0.5), end), "the replay is not kaiten sim's timing")
    # click actions (real mouse events): start, end and slack, the slack checked by replay
    for i in (1, 7, len(ev) // 2, len(ev) - 3):
        x, y, w = bar_center(page, k, i)
        click(page, x, y)
        shown = page.eval("(function(){var d=%s.box.querySelector('[data-k=\"info\"]').dataset;"
                          "return [+d.i,+d.start,+d.end,+d.slack];})()" % (PANEL % k))
        e = ev[i]
        check(shown[0] == i and close(shown[1], cli_ev[key(e)]["start"]) and close(shown[2], cli_ev[key(e)]["end"]),
              "clicked action %d shows %s" % (i, shown))
        s = shown[3]
        check(close(replay(ev, 0.5, i, s), end) and close(replay(ev, 0.5, i, s + 0.25), end + 0.25),
              "action %s: slack %r does not match the replay" % (key(e), s))
    clean(page, "critical path")
    measured_path(b)


def measured_path(b):
    run = train("mrun", 4, TMP + "/mrun.html")
    page = b.page(1400, 1400)
    page.goto("file://" + TMP + "/mrun.html")
    page.wait("document.body.dataset.kt === 'ready'", what="the run report")
    seed = page.eval("JSON.parse(document.querySelector('details.kt-whatif').dataset.ktWhatif).measured")
    ev, path = seed["events"], seed["path"]
    tl = json.load(open(run + "/timeline.json"))
    meas = tl["measured"]["events"] if "measured" in tl else None
    check(len(path) > 0 and abs(ev[path[-1]][5] - max(e[5] for e in ev)) < 1e-12,
          "the measured path does not end at the step's end")
    check(all(ev[c][4] >= ev[a][5] - 1e-9 for a, c in zip(path, path[1:])),
          "the measured path goes back in time")
    if meas:
        check(len(meas) == len(ev), "%d measured events in timeline.json, %d in the page" % (len(meas), len(ev)))
    drawn = page.eval("document.querySelectorAll('#gantt-step g.kt-wi-measured rect.kt-wi-crit').length")
    check(drawn == len(path), "%d of %d path actions outlined on the measured step" % (drawn, len(path)))
    box = page.eval("(function(){var r=document.querySelector('#gantt-step rect[data-op]:not([data-pred])');"
                    "r.scrollIntoView({block:'center'});var b=r.getBoundingClientRect();"
                    "return [b.left+b.width/2,b.top+b.height/2];})()")
    click(page, box[0], box[1])
    text = page.eval("document.querySelector('.kt-wi-measured-at').textContent")
    check(re.search(r"slack [0-9.e-]+ s", text or ""), "clicking a measured bar shows %r" % text)
    clean(page, "run report")


# ---- 4. drag to reorder ------------------------------------------------------

def events_of(page, k):
    return page.eval("%s.res.sim.events" % (PANEL % k))


def find(ev, rank, label):
    for i, e in enumerate(ev):
        if e["rank"] == rank and "%d%s%d" % (e["stage"], e["op"], e["mb"]) == label:
            return i
    raise KeyError(label)


def drag_to(page, k, i, before):
    """Drags action i (real mouse events) to just before action `before` of
    its rank."""
    ev = events_of(page, k)
    x, y, w = bar_center(page, k, i)
    bx, by, bw = bar_center(page, k, before)
    x, y, w = bar_center(page, k, i)  # after the scroll
    runs = answer(page, k)["runs"]
    ppu = page.eval("%s.chart.ppu" % (PANEL % k))
    e, f = ev[i], ev[before]
    target = f["start"] + (f["end"] - f["start"]) * 0.25  # left of its middle: before it
    dx = (target - (e["start"] + e["end"]) / 2) * ppu
    page.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y, "button": "left",
                                           "buttons": 1, "clickCount": 1})
    for s in (0.3, 0.7, 1.0):
        page.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x + dx * s, "y": y,
                                               "button": "left", "buttons": 1})
    page.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x + dx, "y": y, "button": "left",
                                           "buttons": 0, "clickCount": 1})
    page.wait("+%s.host.dataset.runs > %d" % (PANEL % k, runs), what="the move's answer")


def part_drag(b):
    url = "file://" + report(TMP + "/drag.html", "--schedule", "zb-h1", "-p", "4", "-m", "8")
    page = b.page(1400, 1400)
    k = open_panel(page, 0, url)
    before = answer(page, k)
    ev = events_of(page, k)
    # the last stage's I0 before its F0: the order is wrong
    drag_to(page, k, find(ev, 3, "3I0"), find(ev, 3, "3F0"))
    err = page.eval("%s.box.querySelector('[data-k=\"error\"]').textContent" % (PANEL % k))
    check(page.eval("%s.host.dataset.state" % (PANEL % k)) == "invalid" and "rank 3 runs 3I0 before 3F0" in err,
          "an I before its F: %r" % err)
    check(answer(page, k)["makespan"] == before["makespan"], "an invalid move changed the answer")
    # rank 0's I0 before its F1: rank 0 waits for rank 1's I0, rank 1 for rank 0's F1
    drag_to(page, k, find(ev, 0, "0I0"), find(ev, 0, "0F1"))
    err = page.eval("%s.box.querySelector('[data-k=\"error\"]').textContent" % (PANEL % k))
    check("deadlock" in err and "rank 0 waits at 0I0 for 1" in err and "rank 1 waits at 1F1 for 0F1" in err,
          "a deadlock names the blocked ranks: %r" % err)
    marked = page.eval("%s.chart.svg.querySelectorAll('.kt-wi-blocked').length" % (PANEL % k))
    check(marked >= 2, "%d blocked actions outlined" % marked)
    check(answer(page, k)["makespan"] == before["makespan"], "a deadlocking move changed the answer")
    # a valid move: rank 0's W0 after its I1
    ev = events_of(page, k)
    drag_to(page, k, find(ev, 0, "0W0"), find(ev, 0, "0W1"))
    a = answer(page, k)
    check(a["state"] == "ready", "a valid move was refused: %s" % a["state"])
    ev2 = events_of(page, k)
    order0 = ["%d%s%d" % (e["stage"], e["op"], e["mb"]) for e in ev2 if e["rank"] == 0]
    check(order0.index("0W0") == order0.index("0W1") - 1 and order0.index("0W0") > order0.index("0I1"),
          "rank 0's order after the move: %s" % order0)
    exports(page, k, a)
    memory_limit(b)
    clean(page, "drag")


def exports(page, k, a):
    page.eval("%s.box.querySelector('[data-k=\"export\"]').click()" % (PANEL % k))
    page.wait("!!%s.box.querySelector('[data-k=\"export-text\"]')" % (PANEL % k), what="the exports")
    for form, name in (("text", "order.txt"), ("csv", "order.csv"), ("csv_comms", "order_comms.csv")):
        text = page.eval("%s.box.querySelector('[data-k=\"export-%s\"]').value" % (PANEL % k, form))
        path = TMP + "/" + name
        open(path, "w").write(text)
        v = subprocess.run([K, "validate", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(v.returncode == 0, "kaiten validate %s: %s" % (name, v.stderr.strip()))
        got = sim("--from", path)
        check(close(got["makespan"], a["makespan"]),
              "sim --from %s: %r, the page %r" % (name, got["makespan"], a["makespan"]))
        flags = a["command"].split()
        got = sim("--from", path, *flags)
        check(close(got["makespan"], a["makespan"]), "sim --from %s %s: %r" % (name, a["command"], got["makespan"]))


def memory_limit(b):
    url = "file://" + report(TMP + "/zba.html", "--schedule", "zb-auto", "-p", "4", "-m", "8",
                             "--mem-limit", "0.5x")
    page = b.page(1400, 1400)
    k = open_panel(page, 0, url)
    before = answer(page, k)
    ev = events_of(page, k)
    fs = [i for i, e in enumerate(ev) if e["rank"] == 0 and e["op"] == "F"]
    firsts = [i for i, e in enumerate(ev) if e["rank"] == 0]
    drag_to(page, k, fs[-1], firsts[0])  # its last F first: one more activation held
    err = page.eval("%s.box.querySelector('[data-k=\"error\"]').textContent" % (PANEL % k))
    check("over the memory limit 2" in err and "rank 0 peaks at 3" in err, "past the limit: %r" % err)
    check(answer(page, k)["makespan"] == before["makespan"], "a move past the limit was kept")
    clean(page, "memory limit")


# ---- 5. diff mode ------------------------------------------------------------

def part_diff(b):
    path = TMP + "/cmp.html"
    subprocess.run([K, "compare", "-p", "4", "-m", "8", "--schedules", "1f1b,zb-h1", "--report", path],
                   check=True, stdout=subprocess.DEVNULL)
    one, zb = sim("--schedule", "1f1b", "-p", "4", "-m", "8"), sim("--schedule", "zb-h1", "-p", "4", "-m", "8")
    page = b.page(1400, 1600)
    k = open_panel(page, 1, "file://" + path)  # zb-h1's panel
    runs = answer(page, k)["runs"]
    page.eval("(function(){var s=%s.box.querySelector('[data-k=\"diff\"]');"
              "for(var i=0;i<s.options.length;i++)if(s.options[i].text==='1f1b')s.value=s.options[i].value;"
              "s.dispatchEvent(new Event('change'));})()" % (PANEL % k))
    page.wait("!%s.box.querySelector('[data-k=\"diffline\"]').hidden" % (PANEL % k), what="diff mode")
    d = page.eval("(function(){var b=%s.box;function v(k){return +b.querySelector('[data-k=\"'+k+'\"]')"
                  ".textContent;}return {dm:v('dmakespan'),dp:v('dpeak'),moved:v('moved'),"
                  "shift:%s.shift.map(function(d,i){return [i,d];}),base:%s.baseChart.tl.events.length};})()"
                  % (PANEL % k, PANEL % k, PANEL % k))
    check(close(d["dm"], zb["makespan"] - one["makespan"], 1e-6),
          "delta makespan %r, kaiten sim says %r" % (d["dm"], zb["makespan"] - one["makespan"]))
    check(close(d["dp"], zb["peak_memory"] - one["peak_memory"], 1e-6),
          "delta peak memory %r vs %r" % (d["dp"], zb["peak_memory"] - one["peak_memory"]))
    check(d["base"] == len(one["events"]), "the baseline Gantt has %d of %d bars" % (d["base"], len(one["events"])))
    check(len(d["shift"]) == len(zb["events"]), "%d moves for %d actions" % (len(d["shift"]), len(zb["events"])))
    ev = events_of(page, k)
    base = {(e["stage"], e["mb"], "I" if e["op"] == "B" else e["op"]): e for e in one["events"]}
    moved, bad = 0, 0
    for i, shift in d["shift"]:
        e = ev[i]
        o = base.get((e["stage"], e["mb"], e["op"]))
        if o is None:
            bad += shift is not None
            continue
        want = e["start"] - o["start"]
        moved += abs(want) > 1e-9
        bad += shift is None or not close(shift, want)
    check(bad == 0, "%d actions show the wrong move" % bad)
    check(moved == d["moved"], "%d actions moved, the page says %d" % (moved, d["moved"]))
    check(answer(page, k)["runs"] == runs, "diff mode re-simulated")
    clean(page, "diff")
    # a run: the what-if (the prediction) against the measured step
    train("drun", 4, TMP + "/drun.html")
    page = b.page(1400, 1600)
    k = open_panel(page, 0, "file://" + TMP + "/drun.html")
    page.eval("(function(){var s=%s.box.querySelector('[data-k=\"diff\"]');"
              "for(var i=0;i<s.options.length;i++)if(s.options[i].text==='the measured step')s.value=s.options[i].value;"
              "s.dispatchEvent(new Event('change'));})()" % (PANEL % k))
    page.wait("!%s.box.querySelector('[data-k=\"diffline\"]').hidden" % (PANEL % k), what="diff with the run")
    got = page.eval("(function(){var p=%s;return {dm:+p.box.querySelector('[data-k=\"dmakespan\"]').textContent,"
                    "ms:p.res.sim.makespan,ev:p.seed.measured.events,base:p.baseChart.tl.events.length};})()" % (PANEL % k))
    span = max(e[5] for e in got["ev"])
    check(close(got["dm"], got["ms"] - span, 1e-5), "against the measured step: delta %r, want %r"
          % (got["dm"], got["ms"] - span))
    check(got["base"] == len(got["ev"]), "the measured step drawn with %d of %d actions" % (got["base"], len(got["ev"])))
    clean(page, "diff with a run")


# ---- 6. why idle -------------------------------------------------------------

def part_idle(b):
    cli = ["--schedule", "1f1b", "-p", "4", "-m", "8", "--tf", "1,1,2,1", "--tb", "1,1,2,1", "--comm", "0.2"]
    url = "file://" + report(TMP + "/idle.html", *cli)
    want = sim(*cli)
    page = b.page(1400, 1400)
    k = open_panel(page, 0, url)
    bars = page.eval("Array.from(%s.box.querySelectorAll('#wi-idle rect[data-part]')).map(function(r){"
                     "return [+r.dataset.rank, r.dataset.part, +r.dataset.value];})" % (PANEL % k))
    most = max(r["busy"] for r in want["ranks"])
    got = {(r, part): v for r, part, v in bars}
    for r, rank in enumerate(want["ranks"]):
        check(close(got.get((r, "busy")), rank["busy"]), "rank %d busy %r vs %r" % (r, got.get((r, "busy")), rank["busy"]))
        check(close(got.get((r, "structural bubble")), want["makespan"] - most),
              "rank %d structural %r vs %r" % (r, got.get((r, "structural bubble")), want["makespan"] - most))
        check(close(got.get((r, "imbalance")), most - rank["busy"]),
              "rank %d imbalance %r vs %r" % (r, got.get((r, "imbalance")), most - rank["busy"]))
        check(close(rank["idle"], (want["makespan"] - most) + (most - rank["busy"])), "the split adds up")
    check(page.eval("%s.box.querySelector('[data-k=\"measured-idle\"]').hidden" % (PANEL % k)),
          "a simulation shows measured idle causes")
    clean(page, "why idle")
    # a run: nothing without measured causes; the causes per rank when the step has them
    train("irun", 3, TMP + "/irun.html")
    page = b.page(1400, 1400)
    k = open_panel(page, 0, "file://" + TMP + "/irun.html")
    has = page.eval("%s.seed.measured.ranks.some(function(r){return !!r.idle_causes;})" % (PANEL % k))
    shown = not page.eval("%s.box.querySelector('[data-k=\"measured-idle\"]').hidden" % (PANEL % k))
    check(shown == has, "measured idle causes shown: %s, recorded: %s" % (shown, has))
    causes = {"schedule": 0.004, "core_wait": 0.002, "comm": 0.001, "overhead": 0.0005, "optimizer": 0.0015}
    page.eval("(function(){var p=%s;p.seed.measured.ranks.forEach(function(r,i){r.idle_causes=%s;"
              "r.busy=0.01*(i+1);});window.ktWhatIf.measuredIdle(p);})()" % (PANEL % k, json.dumps(causes)))
    bars = page.eval("Array.from(%s.box.querySelectorAll('#wi-measured-idle rect[data-part]')).map(function(r){"
                     "return [+r.dataset.rank, r.dataset.part, +r.dataset.value];})" % (PANEL % k))
    got = {(r, part): v for r, part, v in bars}
    n = page.eval("%s.seed.measured.ranks.length" % (PANEL % k))
    check(n >= 2 and all(close(got.get((r, c)), v) for r in range(n) for c, v in causes.items())
          and all(close(got.get((r, "compute")), 0.01 * (r + 1)) for r in range(n)),
          "measured causes drawn: %s" % bars)
    clean(page, "run report's why idle")


# ---- 7. documents of varying length -----------------------------------------

def part_packing(b):
    """The packing row: documents, fifo or balanced, tokens per micro-batch and
    the seed give what kaiten sim gives, and the facts line says the tokens."""
    url = "file://" + report(TMP + "/pack.html", "--schedule", "1f1b", "-p", "4", "-m", "8")
    page = b.page(1400, 1400)
    k = open_panel(page, 0, url)
    base = ["--schedule", "1f1b", "-p", "4", "-m", "8", "--doc-lengths", "lognormal:1:16:1024"]
    setting(page, k, "docs", "lognormal:1:16:1024")
    _, fifo = same_as_cli(page, k, base + ["--packing", "fifo"], "fifo packing")
    shown = page.eval("+%s.box.querySelector('[data-k=\"tokens-per-time\"]').textContent" % (PANEL % k))
    check(close(shown, fifo["packing"]["tokens_per_time"], 1e-3),
          "fifo: %r tokens per time unit shown, kaiten sim %r" % (shown, fifo["packing"]["tokens_per_time"]))
    setting(page, k, "packing", "balanced")
    a, bal = same_as_cli(page, k, base + ["--packing", "balanced"], "balanced packing")
    check("--doc-lengths lognormal:1:16:1024 --packing balanced" in a["command"] and "'" not in a["command"],
          "the command says the packing, not each micro-batch's costs: %s" % a["command"][:300])
    check(bal["packing"]["tokens_per_time"] >= fifo["packing"]["tokens_per_time"],
          "balanced %r tokens per time under fifo's %r" % (bal["packing"]["tokens_per_time"],
                                                           fifo["packing"]["tokens_per_time"]))
    setting(page, k, "mbTokens", 2048)
    setting(page, k, "seed", 7)
    same_as_cli(page, k, base + ["--packing", "balanced", "--mb-tokens", "2048", "--seed", "7"],
                "2048 tokens, seed 7")
    docs = page.eval("+%s.box.querySelector('[data-k=\"documents\"]').textContent" % (PANEL % k))
    want = sim(*(base + ["--packing", "balanced", "--mb-tokens", "2048", "--seed", "7"]))["packing"]
    check(docs == want["documents"], "documents shown %r, kaiten sim %r" % (docs, want["documents"]))
    # off again: the plain schedule, no packing line
    setting(page, k, "docs", "")
    same_as_cli(page, k, ["--schedule", "1f1b", "-p", "4", "-m", "8"], "documents off")
    check(not page.eval("!!%s.box.querySelector('[data-k=\"documents\"]')" % (PANEL % k)),
          "the packing line stays without documents")
    clean(page, "packing")


with Browser(CHROMIUM) as browser:
    {"panel": part_panel, "critical": part_critical, "drag": part_drag, "diff": part_diff,
     "idle": part_idle, "packing": part_packing}[PART](browser)
sys.exit(check.summary("test_whatif_" + PART))
