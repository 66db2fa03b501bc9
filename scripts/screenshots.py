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


with Browser(CHROMIUM) as browser:
    replay(browser)
    live(browser)
    overlay(browser)
