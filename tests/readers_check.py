"""Readers on values and files no run should hold (issue 35, section 2); run
by test_readers.sh:  readers_check.py KAITEN TMPDIR [CHROMIUM]

1. kaiten report on losses of +-1e308, a constant -1e20 or 2^53, NaN and
   infinities: ends within seconds with a well-formed page (no "nan" or
   "inf" coordinates, at most 64 ticks an axis).
2. A timeline whose span overflows to infinity: report and serve refuse it
   with one line naming timeline.json, at once; a huge but finite span
   (1e300) is served.
3. A NUL byte and a malformed line in metrics.jsonl: the line is skipped
   with one warning naming file and line, every other step is kept (report
   and the serve stream).
4. A 2.2 GB line and a 1.1 GB file (sparse): refused with a clear error at
   once, in bounded memory (max RSS), by report and serve.
5. The live page (Chromium, when installed) on a constant loss of 2^53,
   alternating +-1e308 and NaN: it draws and stays responsive.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(__file__))
import ktserve  # noqa: E402
from ktserve import Stream, check, serve, stop  # noqa: E402

K, TMP = sys.argv[1:3]
CHROMIUM = sys.argv[3] if len(sys.argv) > 3 else ""
ktserve.K = K
SANITIZED = os.environ.get("KT_SANITIZED") == "1"


def run(args, timeout=30):
    """Runs kaiten ARGS; (exit code, stderr, seconds, None)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([K] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        return r.returncode, r.stderr, time.monotonic() - t0, None
    except subprocess.TimeoutExpired:
        return None, "(timed out)", time.monotonic() - t0, None


def run_rss(args, timeout=30):
    """As run, with the child's max RSS (MB) from wait4."""
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        errfd = os.open(os.path.join(TMP, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(devnull, 1)
        os.dup2(errfd, 2)
        os.execv(K, [K] + args)
    deadline = t0 + timeout
    while True:
        wpid, status, usage = os.wait4(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            wpid, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    err = open(os.path.join(TMP, "stderr.txt")).read()
    code = os.waitstatus_to_exitcode(status)
    return code, err, time.monotonic() - t0, usage.ru_maxrss / 1024


def make_run(name, losses=None, lines=None, timeline=None):
    d = os.path.join(TMP, name)
    shutil.copytree(os.path.join(TMP, "base"), d)
    src = [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl"))]
    if losses is not None:
        for s, v in zip(src, losses):
            s["loss"] = v
        text = "".join(json.dumps(s, allow_nan=True) + "\n" for s in src)
        text = text.replace("Infinity", "1e999").replace("NaN", "null")
        open(os.path.join(d, "metrics.jsonl"), "w").write(text)
    if lines is not None:
        open(os.path.join(d, "metrics.jsonl"), "wb").write(lines)
    if timeline is not None:
        open(os.path.join(d, "timeline.json"), "w").write(timeline)
    return d


CASES = {
    "huge": [1e308 if i % 2 else -1e308 for i in range(20)],
    "const-neg": [-1e20] * 20,
    "const-2p53": [2.0 ** 53] * 20,
    "const-max": [1.7976931348623157e308] * 20,
    "nan": [float("nan")] * 20,
    "inf": [float("inf") if i % 3 else -float("inf") for i in range(20)],
    "tiny": [5e-324 * (i % 2) for i in range(20)],
}


def reports():
    for name, losses in CASES.items():
        d = make_run("r-" + name, losses=losses)
        out = os.path.join(TMP, name + ".html")
        code, err, secs, _ = run(["report", d, "-o", out], timeout=20)
        check(code == 0 and secs < (10 if SANITIZED else 3),
              "report on %s losses: exit %s after %.1f s %s" % (name, code, secs, err[-200:]))
        if code != 0:
            continue
        text = open(out, encoding="utf-8").read()
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            check(False, "report on %s: not well-formed: %s" % (name, e))
            continue
        loss = [s for s in root.iter("svg") if s.get("id") == "chart-loss"]
        check(bool(loss), "report on %s: no loss chart" % name)
        bad = re.search(r'(?:[xy][12]?|cx|cy|width|height|d)="[^"]*(?:nan|inf)', text, re.I)
        check(not bad, "report on %s: non-finite coordinate near %r" % (
            name, text[bad.start():bad.start() + 60] if bad else ""))
        for svg in loss:
            ticks = [t for t in svg.iter("text") if t.get("text-anchor") == "end"]
            check(len(ticks) <= 65, "report on %s: %d y ticks" % (name, len(ticks)))


TL = ('{"measured":{"p":2,"time_unit":"s","events":[{"rank":0,"stage":0,"mb":0,"op":"F",'
      '"start":%s,"end":%s},{"rank":1,"stage":1,"mb":0,"op":"F","start":0,"end":1}]},'
      '"predicted":{"p":2,"time_unit":"s","events":[{"rank":0,"stage":0,"mb":0,"op":"F",'
      '"start":0,"end":1}]}}\n')


def timelines():
    d = make_run("overflow", timeline=TL % ("-1e308", "1e308"))
    for cmd in (["report", d, "-o", os.path.join(TMP, "o.html")], ["serve", d, "--addr", "0"]):
        code, err, secs, rss = run_rss(cmd, timeout=20)
        check(code == 2 and secs < 5 and len(err.strip().splitlines()) == 1 and
              "timeline.json" in err and "too far" in err,
              "%s on an overflowing span: exit %s after %.1f s: %r" % (cmd[0], code, secs, err))
    d = make_run("wide", timeline=TL % ("0", "1e300"))
    t0 = time.monotonic()
    proc, port = serve([d, "--addr", "127.0.0.1:0"])
    secs = time.monotonic() - t0
    s = Stream(port)
    check(s.wait(lambda e: any(x == "end" for x, _ in e), 10) and secs < 5,
          "serve of a 1e300 s timeline: listening after %.1f s, events %s" % (
              secs, [x for x, _ in s.events][:5]))
    tl = [d for e, d in s.events if e == "timeline"]
    check(bool(tl) and len(tl[0].get("svg_measured", "")) < 2000000, "its Gantt: %d bytes" %
          (len(tl[0].get("svg_measured", "")) if tl else -1))
    s.close()
    check(stop(proc) == 0, "serve exit")
    code, err, secs, _ = run(["report", d, "-o", os.path.join(TMP, "w.html")], timeout=20)
    check(code == 0 and secs < 5, "report of a 1e300 s timeline: %s after %.1f s" % (code, secs))


def bad_lines():
    base = open(os.path.join(TMP, "base", "metrics.jsonl"), "rb").read().split(b"\n")[:-1]
    nul = list(base)
    nul[16] = nul[16][:20] + b"\0" + nul[16][20:]  # line 17: 3 of 20 steps were lost
    mal = list(base)
    mal[9] = b'{"step": garbage'  # line 10
    for name, lines, lineno, why in (("nul", nul, 17, "a NUL byte in the line"), ("malformed", mal, 10,
                                                                       "malformed JSON")):
        d = make_run("l-" + name, lines=b"\n".join(lines) + b"\n")
        code, err, _, _ = run(["report", d, "-o", os.path.join(TMP, name + ".html")])
        want = "%s/metrics.jsonl line %d: %s (skipped)" % (d, lineno, why)
        check(code == 0 and err.count("warning") == 1 and want in err,
              "report with a %s line: exit %s, %r" % (name, code, err))

        proc, port = serve([d, "--addr", "127.0.0.1:0"])
        s = Stream(port)
        s.wait(lambda e: any(x == "end" for x, _ in e), 10)
        steps = s.steps()
        check(steps == [k for k in range(1, 21) if k != lineno],
              "serve with a %s line: steps %s" % (name, steps))
        s.close()
        check(stop(proc) == 0, "serve exit")
        err = proc.stderr.read()
        check(err.count("warning") == 1 and want in err, "serve's warning: %r" % err)


def huge_files():
    limit = 300 if SANITIZED else 100  # MB of RSS
    d = make_run("longline")
    path = os.path.join(d, "metrics.jsonl")
    with open(path, "r+b") as f:
        f.seek(0, 2)
        f.write(b'{"step":21,"loss":1')
        f.truncate(2200 * 1024 * 1024)  # sparse: a 2.2 GB line of NULs
        f.seek(0, 2)
        f.write(b"}\n")
    for cmd in (["report", d, "-o", os.path.join(TMP, "x.html")], ["serve", d, "--addr", "0"]):
        code, err, secs, rss = run_rss(cmd, timeout=30)
        check(code == 2 and secs < 5 and rss < limit and "2.148 GiB" in err and "refused" in err,
              "%s of a 2.2 GB line: exit %s, %.1f s, %.0f MB: %r" % (cmd[0], code, secs, rss, err))
    # a line far longer than kaiten writes in a file of ordinary size (5 MB)
    os.truncate(path, 5 * 1024 * 1024)
    with open(path, "ab") as f:
        f.write(b'}\n{"step":22,"loss":1}\n')
    for cmd in (["report", d, "-o", os.path.join(TMP, "x.html")], ["serve", d, "--addr", "0"]):
        code, err, secs, rss = run_rss(cmd, timeout=30)
        check(code == 2 and secs < 5 and rss < limit and "line 21 is longer than 1 MiB" in err,
              "%s of a 5 MB line: exit %s, %.1f s, %.0f MB: %r" % (cmd[0], code, secs, rss, err))
    shutil.rmtree(d)


def live_page():
    if not CHROMIUM:
        print("readers_check: the live page part skipped (no Chromium)")
        return
    from cdp import Browser, CDPError
    dirs = [make_run("p-" + n, losses=CASES[n]) for n in ("const-2p53", "huge", "nan", "const-neg")]
    proc, port = serve(dirs + ["--addr", "127.0.0.1:0"])
    try:
        with Browser(CHROMIUM) as b:
            page = b.page(1400, 1600)
            page.goto("http://127.0.0.1:%d/" % port)
            try:
                page.wait("document.body.dataset.live === 'finished' && "
                          "+document.body.dataset.draws >= 1", timeout=30,
                          what="the page on extreme losses")
            except CDPError as e:  # a script in an endless loop answers nothing
                check(False, "the live page on extreme losses: %s" % e)
                return
            b.pump(0.6)
            t0 = time.monotonic()
            n = page.eval("document.querySelectorAll('#live-loss text[text-anchor=end]').length")
            check(time.monotonic() - t0 < 2 and 0 < n <= 65, "the loss chart has %s y ticks" % n)
            check(not page.errors(), "console errors: %s" % page.errors())
    finally:
        check(stop(proc) == 0, "serve exit")


def main():
    subprocess.run([K, "train", "--model", "mlp", "--layers", "4", "--hidden", "16", "--stages",
                    "2", "-m", "4", "--steps", "20", "--val-every", "5", "--no-live", "--run-dir",
                    os.path.join(TMP, "base")], check=True, stdout=subprocess.DEVNULL)
    os.remove(os.path.join(TMP, "base", ".lock"))
    reports()
    timelines()
    bad_lines()
    huge_files()
    live_page()
    ktserve.finish("test_readers")


main()
