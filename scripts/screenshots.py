"""Regenerates the README's screenshots (docs/img/*.png) from real runs, in
headless Chromium (tests/cdp.py). Run by scripts/screenshots.sh:

    screenshots.py KAITEN CHROMIUM WORKDIR OUTDIR

- dashboard.png: kaiten train --serve while the default GPT trains on 4
  stages (1F1B): the summary table and the training curves, live;
- dashboard-step.png: the same page's latest step, measured and predicted,
  with the replay stopped mid-step;
- runs.png: kaiten serve of three runs of the same model on 2 ranks (1f1b,
  zb-h1, zbv): the curves overlaid;
- replay.png: the conveyor belt in a simulation report (zb-h1, P=4, M=8).
- whatif*.png: the what-if panel of a simulation report (zb-h1, P=4, M=8):
  a straggler and a slower link with the critical path and an action
  clicked (whatif.png), a drag that deadlocks (whatif-drag.png), why idle
  (whatif-idle.png); diff mode in a comparison (whatif-diff.png); the
  measured step's critical path in a run report (whatif-measured.png).

Usage: screenshots.py KAITEN CHROMIUM WORKDIR OUTDIR [PARTS], PARTS a
comma-separated subset of replay, live, overlay, whatif (default: all).
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from cdp import Browser  # noqa: E402

K, CHROMIUM, WORK, OUT = sys.argv[1:5]
MODEL = ["--stages", "4", "-m", "8", "-b", "4", "--val-every", "20", "--no-live"]


def address(proc, stream):
    for _ in range(400):
        line = stream.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if m:
            return m.group(0)
    raise RuntimeError("no address printed")


def save(name, png):
    path = os.path.join(OUT, name)
    open(path, "wb").write(png)
    print("%s: %d KB" % (path, len(png) // 1024))


def scrub(page, selector, value):
    page.eval("(function(){var s=document.querySelector(%r);s.value=%d;"
              "s.dispatchEvent(new Event('input'));})()" % (selector, value))


def clip(page, first, last, pad=8):
    """The box from the top of `first` to the bottom of `last`."""
    a, b = page.rect(first), page.rect(last)
    return {"x": 0, "y": max(0, a["y"] - pad), "width": 1400,
            "height": b["y"] + b["height"] - a["y"] + pad + 3}


def live(b):
    proc = subprocess.Popen([K, "train"] + MODEL + ["--steps", "120", "--run-dir",
                            WORK + "/1f1b", "--serve", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    page = b.page(1400, 2200)
    page.goto(address(proc, proc.stderr))
    page.wait("+document.body.dataset.steps >= 60 && "
              "!!document.querySelector('#gantt-m-0 svg.gantt')", timeout=300)
    b.pump(0.8)
    save("dashboard.png", page.screenshot(clip=clip(page, "header", "#chart-bubble")))
    scrub(page, "#step-0 .kt-controls input", 430)
    save("dashboard-step.png", page.screenshot(clip=clip(page, "#step-0", "#gantt-p-0")))
    page.wait("document.body.dataset.live === 'finished'", timeout=300)
    proc.wait()


def overlay(b):
    dirs = []
    for name in ("1f1b", "zb-h1", "zbv"):  # zbv: two chunks per rank, 4 stages
        dirs.append(WORK + "/p2/" + name)
        subprocess.run([K, "train", "--stages", "2", "-m", "8", "-b", "4", "--val-every", "20",
                        "--no-live", "--steps", "100", "--schedule", name, "--run-dir",
                        dirs[-1]], check=True, stdout=subprocess.DEVNULL)
    proc = subprocess.Popen([K, "serve"] + dirs + ["--addr", "0"], stdout=subprocess.PIPE,
                            text=True)
    try:
        page = b.page(1400, 1400)
        page.goto(address(proc, proc.stdout))
        page.wait("document.body.dataset.live === 'finished'", timeout=60)
        b.pump(0.8)
        save("runs.png", page.screenshot(clip=clip(page, "#summary", "#chart-bubble")))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def replay(b):
    subprocess.run([K, "sim", "--schedule", "zb-h1", "-p", "4", "-m", "8", "--report",
                    WORK + "/sim.html"], check=True, stdout=subprocess.DEVNULL)
    page = b.page(1400, 900)
    page.goto("file://" + WORK + "/sim.html")
    page.wait("document.body.dataset.kt === 'ready'")
    scrub(page, ".kt-controls input", 420)
    time.sleep(0.2)
    save("replay.png", page.screenshot(clip=clip(page, "#pipeline h2", "svg.gantt")))


def panel(b, path, index=0, height=1500):
    page = b.page(1400, height)
    page.goto("file://" + path)
    page.wait("document.body.dataset.kt === 'ready'")
    page.eval("document.querySelectorAll('details.kt-whatif')[%d].open = true" % index)
    page.wait("document.querySelectorAll('details.kt-whatif')[%d].dataset.state === 'ready'" % index,
              timeout=60)
    return page, "window.ktWhatIf.panels[0]"


def set_value(page, p, key, value):
    runs = page.eval("+%s.host.dataset.runs" % p)
    page.eval("(function(){var el=%s.box.querySelector('[data-k=\"%s\"]');el.value=%r;"
              "if(el.tagName!=='SELECT')el.dispatchEvent(new Event('input'));"
              "el.dispatchEvent(new Event('change'));})()" % (p, key, str(value)))
    if key != "stage":
        page.wait("+%s.host.dataset.runs > %d && !%s.pending" % (p, runs, p))


def panel_clip(page, first, last):
    a, z = page.rect(first), page.rect(last)
    return {"x": 0, "y": a["y"] - 6, "width": 1400, "height": z["y"] + z["height"] - a["y"] + 12}


def click_bar(page, p, i):
    box = page.eval("(function(){var p=%s;p.chart.el.scrollIntoView({block:'center'});"
                    "var b=window.ktWhatIf.barBox(p,%d);return [b.x+b.w/2,b.y+b.h/2];})()" % (p, i))
    for kind in ("mousePressed", "mouseReleased"):
        page.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                               "clickCount": 1})


def whatif(b):
    sim = WORK + "/wi.html"
    subprocess.run([K, "sim", "--schedule", "zb-h1", "-p", "4", "-m", "8", "--report", sim], check=True,
                   stdout=subprocess.DEVNULL)
    page, p = panel(b, sim)
    for key, value in (("slow", 2), ("slowF", 1.5), ("lat", 0.25)):
        set_value(page, p, key, value)
    click_bar(page, p, 20)
    save("whatif.png", page.screenshot(clip=panel_clip(page, "details.kt-whatif", "[data-k=\"info\"]")))
    save("whatif-idle.png", page.screenshot(clip=panel_clip(page, "[data-k=\"memory\"]", "[data-k=\"idle\"]")))
    # a drag that deadlocks: rank 0's I0 before its F1
    page, p = panel(b, sim)
    ev = page.eval("%s.res.sim.events" % p)
    find = lambda r, lab: next(i for i, e in enumerate(ev)  # noqa: E731
                               if e["rank"] == r and "%d%s%d" % (e["stage"], e["op"], e["mb"]) == lab)
    i, j = find(0, "0I0"), find(0, "0F1")
    box = page.eval("(function(){var p=%s;p.chart.el.scrollIntoView({block:'center'});var a=window.ktWhatIf."
                    "barBox(p,%d),b=window.ktWhatIf.barBox(p,%d);return [a.x+a.w/2,a.y+a.h/2,b.x+b.w*0.25];})()"
                    % (p, i, j))
    page.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": box[0], "y": box[1], "button": "left",
                                           "buttons": 1, "clickCount": 1})
    page.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": box[2], "y": box[1], "button": "left",
                                           "buttons": 1})
    page.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": box[2], "y": box[1], "button": "left",
                                           "clickCount": 1})
    page.wait("%s.host.dataset.state === 'invalid'" % p)
    save("whatif-drag.png", page.screenshot(clip=panel_clip(page, "[data-k=\"facts\"]", "#wi-gantt")))
    cmp = WORK + "/wi-cmp.html"
    subprocess.run([K, "compare", "-p", "4", "-m", "8", "--schedules", "1f1b,zb-h1", "--report", cmp], check=True,
                   stdout=subprocess.DEVNULL)
    page, p = panel(b, cmp, 1, 1700)
    page.eval("(function(){var s=%s.box.querySelector('[data-k=\"diff\"]');for(var i=0;i<s.options.length;i++)"
              "if(s.options[i].text==='1f1b')s.value=s.options[i].value;s.dispatchEvent(new Event('change'));})()" % p)
    save("whatif-diff.png", page.screenshot(clip=panel_clip(page, "[data-k=\"facts\"]", "#wi-gantt")))
    run = WORK + "/wi-run"
    subprocess.run([K, "train", "--stages", "4", "-m", "8", "-b", "4", "--steps", "6", "--no-live", "--run-dir",
                    run], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([K, "report", run, "-o", run + ".html"], check=True, stdout=subprocess.DEVNULL)
    page = b.page(1400, 1800)
    page.goto("file://" + run + ".html")
    page.wait("document.body.dataset.kt === 'ready'")
    page.eval("document.querySelector('#gantt-step').scrollIntoView()")
    save("whatif-measured.png", page.screenshot(clip=panel_clip(page, "#gantt-step", ".kt-wi-measured-at")))


PARTS = {"replay": replay, "live": live, "overlay": overlay, "whatif": whatif}
with Browser(CHROMIUM) as browser:
    for part in (sys.argv[5].split(",") if len(sys.argv) > 5 else list(PARTS)):
        PARTS[part](browser)
