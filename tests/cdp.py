"""A small headless-Chromium driver over the DevTools protocol, standard
library only: the browser speaks CDP on a pipe (--remote-debugging-pipe,
fd 3 in, fd 4 out, messages ended by NUL), so no websocket client is needed.

    with Browser(path) as b:
        page = b.page(width=1400, height=900)
        page.goto("file:///tmp/report.html")
        page.wait("document.body.dataset.kt === 'ready'")
        png = page.screenshot()
        assert not page.errors()

A page records what the tests check: console errors, uncaught exceptions,
log entries at level error (failed loads, blocked requests) and every URL it
requested.
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio", "--disable-extensions",
         # nothing but the loopback resolves: a page that reaches out fails visibly
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


class CDPError(RuntimeError):
    pass


class Tally:
    """Counts checks and failures; a failure prints what went wrong."""

    def __init__(self):
        self.checks = self.fails = 0

    def __call__(self, cond, what):
        self.checks += 1
        if not cond:
            self.fails += 1
            print("FAIL: " + what, file=sys.stderr)
        return cond

    def summary(self, name):
        print("%s: %d checks, %d failed: %s" % (name, self.checks, self.fails,
                                                "FAIL" if self.fails else "OK"))
        return 1 if self.fails else 0


class Browser:
    def __init__(self, binary, extra=(), timeout=60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="kt-chromium-")
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()

        def child_fds():
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(os.path.join(self.profile, "browser.log"), "wb")
        self.proc = subprocess.Popen(
            [binary] + FLAGS + list(extra) +
            ["--remote-debugging-pipe", "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(cmd_r)
        os.close(res_w)
        self.out, self.inp = cmd_w, res_r
        self.buf = b""
        self.next_id = 0
        self.events = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.out, self.inp):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.inp], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise CDPError("the browser closed the pipe (crashed?)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def pump(self, seconds):
        """Collects events for a while."""
        deadline = time.monotonic() + seconds
        while True:
            m = self._read(deadline)
            if m is None:
                return
            if "method" in m:
                self.events.append(m)

    def call(self, method, params=None, session=None, timeout=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.out, data):]
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = self._read(deadline)
            if m is None:
                raise CDPError("%s: no answer in time" % method)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise CDPError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def page(self, width=1400, height=900):
        return Page(self, width, height)


class Page:
    def __init__(self, browser, width, height):
        self.b = browser
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.call("Target.attachToTarget",
                                    {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.resize(width, height)

    def call(self, method, params=None, timeout=None):
        return self.b.call(method, params, self.session, timeout)

    def resize(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def goto(self, url):
        self.call("Page.navigate", {"url": url})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CDPError("%s: %s" % (expr, r["exceptionDetails"].get("text")))
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=30, what=None):
        """Polls expr until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                v = self.eval(expr)  # fails while a navigation replaces the document
            except CDPError as e:
                v, last = None, e
            if v:
                return v
            if time.monotonic() > deadline:
                raise CDPError("timed out waiting for %s%s" % (what or expr,
                                                               " (%s)" % last if last else ""))
            self.b.pump(0.1)

    def screenshot(self, clip=None):
        params = {"format": "png"}
        if clip:
            params["clip"] = dict(clip, scale=1)
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def rect(self, selector):
        """The bounding box of an element in page coordinates."""
        return self.eval("(function(){var r=document.querySelector(%s).getBoundingClientRect();"
                         "return {x:r.left+window.scrollX,y:r.top+window.scrollY,"
                         "width:r.width,height:r.height};})()" % json.dumps(selector))

    def _mine(self):
        return [e for e in self.b.events if e.get("sessionId") == self.session]

    def errors(self):
        """Console errors, uncaught exceptions and error log entries, as text."""
        self.b.pump(0.05)
        out = []
        for e in self._mine():
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get(
                    "description", "")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], " ".join(
                    str(a.get("value", a.get("description"))) for a in p.get("args", []))))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: %s %s" % (p["entry"].get("text"), p["entry"].get("url", "")))
        return out

    def requests(self):
        """Every URL the page asked for."""
        return [e["params"]["request"]["url"] for e in self._mine()
                if e["method"] == "Network.requestWillBeSent"]


def start_dashboard(kaiten, args, stream="stdout", timeout=60):
    """Starts `kaiten ARGS...`, a command that prints its dashboard's address
    on STREAM (serve: stdout; train --serve: stderr); returns (proc, url)."""
    import re
    proc = subprocess.Popen([kaiten] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out = proc.stdout if stream == "stdout" else proc.stderr
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = out.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if m:
            return proc, m.group(0)
        if not line and proc.poll() is not None:
            break
    raise RuntimeError("%s printed no address: %s" % (args[0], proc.stderr.read()))


def open_whatif(page, index, check, who):
    """Opens the page's what-if panel number INDEX and waits for its first
    answer; returns the panel's index in window.ktWhatIf.panels. Exits 77
    (skip) when kaiten was built without the in-page simulator, 1 (after
    CHECK records why) when the panel did not start."""
    sel = "document.querySelectorAll('details.kt-whatif')[%d]" % index
    page.eval("(function(){var d=%s;d.open=true;d.scrollIntoView();})()" % sel)
    page.wait("(function(){var d=%s;return d.dataset.state==='ready'||d.dataset.state==='error';})()"
              % sel, what="the what-if panel")
    if page.eval(sel + ".dataset.state") != "ready":
        text = page.eval(sel + ".textContent") or ""
        if "without the in-page simulator" in text:
            print("%s: SKIP: kaiten was built without the in-page simulator" % who)
            sys.exit(77)
        check(False, "the panel did not start: %s" % text)
        sys.exit(1)
    return page.eval("window.ktWhatIf.panels.indexOf(%s.ktPanel)" % sel)
