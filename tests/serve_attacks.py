"""kaiten serve under attack and misuse (issue 35, section 1), over loopback
only; run by test_serve_attacks.sh:  serve_attacks.py KAITEN TMPDIR

1. Files: a symbolic or hard link in the run directory (to a file outside), one
   swapped in after the server started, a FIFO: never served (404), the
   outside file's bytes never in a response.
2. Slowloris: 200 connections trickling a request's headers, 500 idle ones,
   a burst from one address: a fresh client gets the page within 2 s every
   time; one address keeps at most 32 connections; an idle connection is
   closed within about 10 s.
3. Remote binding: --addr 0.0.0.0:PORT warns that the runs are readable
   from the network and keeps the Host check (the machine's names and
   addresses and --allow-host pass, another name is 403); train --serve
   0.0.0.0:PORT warns too.
4. A run still training (its lock held, metrics.jsonl and timeline.json
   growing): the stream says "training (pid N)", brings every new step and
   the new timeline, and ends once the lock is released; the same with a
   real trainer.
5. SIGINT, twice, and SIGTERM stop serve with exit 0, even with 200 slow
   connections open.
"""
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import ktserve  # noqa: E402
from ktserve import Stream, check, request, serve, stop  # noqa: E402

K, TMP = sys.argv[1:3]
ktserve.K = K
def train(run_dir, steps=12, extra=()):
    subprocess.run([K, "train", "--model", "mlp", "--layers", "4", "--hidden", "16", "--stages",
                    "2", "-m", "4", "--steps", str(steps), "--val-every", "4", "--no-live",
                    "--run-dir", run_dir] + list(extra), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def copy_run(src, name):
    dst = os.path.join(TMP, name)
    shutil.copytree(src, dst, symlinks=True)
    return dst


# ---- 1. only the run's regular files ----------------------------------------------------------

def files(base):
    secret = os.path.join(TMP, "secret.json")  # JSON, so that the run still loads
    with open(secret, "w") as f:
        f.write('{"traceEvents": [], "secret": "TOP-SECRET-MARKER"}\n')
    ext_cfg = os.path.join(TMP, "outside-config.json")
    shutil.copy(os.path.join(base, "config.json"), ext_cfg)
    run = copy_run(base, "links")
    os.remove(os.path.join(run, "trace.json"))
    os.symlink(secret, os.path.join(run, "trace.json"))  # a link at start
    os.remove(os.path.join(run, "config.json"))
    os.symlink(ext_cfg, os.path.join(run, "config.json"))  # readable JSON outside, linked
    proc, port = serve([run, "--addr", "127.0.0.1:0"])
    try:
        st, body, _ = request(port, "/runs/0/trace.json")
        check(st == 404 and b"TOP-SECRET" not in body, "a symlinked trace.json: %d %r" % (st, body[:60]))
        st, body, _ = request(port, "/runs/0/config.json")
        check(st == 404, "a symlinked config.json was served: %d" % st)
        check(request(port, "/runs/0/metrics.jsonl")[0] == 200, "metrics.jsonl not served")
        # swapped in after the start: timeline.json replaced by a link to the secret
        tl = os.path.join(run, "timeline.json")
        os.rename(tl, tl + ".old")
        os.symlink(secret, tl)
        st, body, _ = request(port, "/runs/0/timeline.json")
        check(st == 404 and b"TOP-SECRET" not in body, "a link swapped in: %d %r" % (st, body[:60]))
        os.remove(tl)
        os.mkfifo(tl)  # a FIFO swapped in: answered at once, not hung
        st, _, secs = request(port, "/runs/0/timeline.json", timeout=5)
        check(st == 404 and secs < 2, "a FIFO: %d after %.1f s" % (st, secs))
        hard_links(run, secret, port)
        # the run directory itself replaced by a link to elsewhere: still the files opened at start
        moved = run + ".moved"
        os.rename(run, moved)
        os.symlink(TMP, run)
        st, body, _ = request(port, "/runs/0/metrics.jsonl")
        check(st == 200 and body.startswith(b'{"step":1'), "after the directory moved: %d" % st)
        for path in ("/runs/0/../secret.json", "/runs/0/secret.json", "/runs/0/%2e%2e/secret.json"):
            st, body, _ = request(port, path)
            check(st == 404 and b"TOP-SECRET" not in body, "%s: %d" % (path, st))
    finally:
        check(stop(proc) == 0, "serve did not exit 0")


def hard_links(run, secret, port):
    """A hard link to a file outside the run (issue 49), at start or swapped
    in, and a file of another user: never served."""
    tl = os.path.join(run, "timeline.json")
    os.remove(tl)
    os.link(secret, tl)  # swapped in while serving
    st, body, _ = request(port, "/runs/0/timeline.json")
    check(st == 404 and b"TOP-SECRET" not in body, "a hard link swapped in: %d %r" % (st, body[:60]))
    m = os.path.join(run, "metrics.jsonl")
    os.link(m, os.path.join(TMP, "metrics-elsewhere"))  # the run's own file, linked elsewhere too
    st, _, _ = request(port, "/runs/0/metrics.jsonl")
    check(st == 404, "a file with two links was served: %d" % st)
    os.remove(os.path.join(TMP, "metrics-elsewhere"))
    check(request(port, "/runs/0/metrics.jsonl")[0] == 200, "metrics.jsonl not served again")
    if os.geteuid() == 0:  # a file that belongs to another user
        os.remove(tl)
        shutil.copy(secret, tl)
        os.chown(tl, 65534, 65534)
        st, body, _ = request(port, "/runs/0/timeline.json")
        check(st == 404 and b"TOP-SECRET" not in body, "another user's file: %d" % st)
    os.remove(tl)
    # linked before the server started
    run2 = copy_run(os.path.join(TMP, "base"), "hardlinked")
    os.remove(os.path.join(run2, "trace.json"))
    os.link(secret, os.path.join(run2, "trace.json"))
    proc, port2 = serve([run2, "--addr", "127.0.0.1:0"])
    try:
        st, body, _ = request(port2, "/runs/0/trace.json")
        check(st == 404 and b"TOP-SECRET" not in body, "a hard link at start: %d %r" % (st, body[:60]))
    finally:
        check(stop(proc) == 0, "serve did not exit 0")


# ---- 2. slow and idle connections ------------------------------------------------------------

def slow_conns(port, n, trickle, src=None):
    """n connections: a request begun and (trickle) fed a header byte every second."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        if src:
            s.bind((src, 0))
        s.setblocking(True)
        try:
            s.connect(("127.0.0.1", port))
            if trickle:
                s.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-a: ")
        except OSError:
            pass
        socks.append(s)
    return socks


def trickler(socks, stop_event):
    while not stop_event.wait(1.0):
        for s in socks:
            try:
                s.send(b"a")
            except OSError:
                pass


def open_count(socks, wait=0.5):
    """How many of socks the server still holds open (a closed one reads EOF)."""
    time.sleep(wait)
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += s.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive


def fresh_page(port, what, src=None):
    st, body, secs = request(port, "/", timeout=10, src=src)
    check(st == 200 and b"EventSource" in body and secs < 2.0,
          "%s: a fresh client got %d after %.2f s" % (what, st, secs))


def slowloris(base):
    proc, port = serve([base, "--addr", "127.0.0.1:0"])
    ev = threading.Event()
    held = []
    try:
        held += slow_conns(port, 16, True)
        fresh_page(port, "16 slow connections")
        held += slow_conns(port, 200, True)
        t = threading.Thread(target=trickler, args=(held, ev), daemon=True)
        t.start()
        for k in range(3):
            fresh_page(port, "200 slow connections (try %d)" % (k + 1))
            time.sleep(0.3)
        held += slow_conns(port, 500, False)
        fresh_page(port, "500 idle connections more")
        fresh_page(port, "all held, another address", src="127.0.0.9")
        # one address holds at most 32; others are untouched by it
        burst = slow_conns(port, 100, False, src="127.0.0.2")
        kept = open_count(burst)
        check(kept <= 32, "one address holds %d connections (at most 32)" % kept)
        fresh_page(port, "after a burst from 127.0.0.2", src="127.0.0.3")
        # the event stream still works among them
        s = Stream(port)
        check(s.wait(lambda e: any(x == "end" for x, _ in e), 5), "no stream among slow clients")
        s.close()
        # an idle connection alone is closed after its time (10 s) even without pressure
        ev.set()
        for x in held + burst:
            x.close()
        time.sleep(0.5)
        lone = slow_conns(port, 1, True)
        t0 = time.monotonic()
        lone[0].settimeout(20)
        try:
            got = lone[0].recv(100)
        except OSError:
            got = b""
        secs = time.monotonic() - t0
        check(8 <= secs <= 14 and not got.startswith(b"HTTP/1.1 200"),
              "an idle connection closed after %.1f s (want about 10)" % secs)
        lone[0].close()
        # 5. SIGTERM with 200 slow connections held: exit 0, promptly
        held = slow_conns(port, 200, True)
        t0 = time.monotonic()
        rc = stop(proc, signal.SIGTERM, timeout=10)
        check(rc == 0 and time.monotonic() - t0 < 4,
              "SIGTERM with 200 slow connections: exit %s after %.1f s" % (rc, time.monotonic() - t0))
    finally:
        ev.set()
        for x in held:
            x.close()
        if proc.poll() is None:
            proc.kill()


# ---- 3. listening on every address -------------------------------------------------------------

def remote(base):
    name = socket.gethostname()
    proc, port = serve([base, "--addr", "0.0.0.0:0", "--allow-host", "dash.example"])
    try:
        time.sleep(0.2)
        for host, want in (("evil.example", 403), ("evil.example:%d" % port, 403),
                           ("localhost", 200), ("127.0.0.1:%d" % port, 200), (name, 200),
                           (name.split(".")[0] + ":%d" % port, 200), ("dash.example", 200),
                           ("DASH.example:%d" % port, 200), ("dash.example.evil", 403),
                           ("127.0.0.1:80x", 403), ("localhost.evil.example", 403)):
            st = request(port, "/runs/0/metrics.jsonl", host=host)[0]
            check(st == want, "bound to 0.0.0.0, Host %s: %d (want %d)" % (host, st, want))
    finally:
        rc = stop(proc)
        err = proc.stderr.read()
    check(rc == 0, "serve --addr 0.0.0.0 exited %s" % rc)
    check("warning" in err and "readable" in err and "0.0.0.0:%d" % port in err,
          "no warning about the network: %r" % err)
    # the loopback keeps its check
    proc, port = serve([base, "--addr", "127.0.0.1:0"])
    check(request(port, "/", host="evil.example")[0] == 403, "loopback: a foreign Host passed")
    check(proc.stderr.readable() and stop(proc) == 0, "serve exit")
    check("warning" not in proc.stderr.read(), "a loopback server warned")
    # bad names are usage errors
    r = subprocess.run([K, "serve", base, "--allow-host", "bad name"], capture_output=True,
                       text=True, timeout=10)
    check(r.returncode == 2 and "bad name" in r.stderr, "--allow-host 'bad name': %d %r" %
          (r.returncode, r.stderr))
    # train --serve on every address warns too
    r = subprocess.run([K, "train", "--synthetic", "--stages", "2", "-m", "2", "--tf", "1",
                        "--tb", "1", "--tw", "1", "--steps", "2", "--no-live", "--serve",
                        "0.0.0.0:0"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "readable" in r.stderr, "train --serve 0.0.0.0: %d %r" %
          (r.returncode, r.stderr[-300:]))
    # and keeps the Host check, with its own --allow-host
    proc = subprocess.Popen([K, "train", "--synthetic", "--stages", "2", "-m", "2", "--tf", "5",
                             "--tb", "5", "--tw", "5", "--steps", "400", "--no-live", "--serve",
                             "0.0.0.0:0", "--allow-host", "dash.example"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stderr:
            m = re.search(r"http://[0-9.]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        check(port is not None, "train --serve printed no address")
        if port:
            for host, want in (("dash.example", 200), ("evil.example", 403), ("localhost", 200)):
                st = request(port, "/", host=host)[0]
                check(st == want, "train --serve 0.0.0.0, Host %s: %d (want %d)" % (host, st, want))
    finally:
        proc.kill()
        proc.wait()


# ---- 4. a run still training ------------------------------------------------------------------

def live_dir(base):
    run = copy_run(base, "growing")
    lines = open(os.path.join(base, "metrics.jsonl")).read().splitlines(True)
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        f.writelines(lines[:5])
    tl = os.path.join(run, "timeline.json")
    os.rename(tl, tl + ".later")
    lock = open(os.path.join(run, ".lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    lock.write("%d\n" % os.getpid())
    lock.flush()
    proc, port = serve([run, "--addr", "127.0.0.1:0"])
    try:
        s = Stream(port)
        check(s.wait(lambda e: len(e) >= 6, 5), "no history")
        hello = s.events[0][1]["runs"][0] if s.events else {}
        check(hello.get("state") == "training (pid %d)" % os.getpid(),
              "hello of a run in training: %r" % hello)
        time.sleep(0.6)
        check(not any(e == "end" for e, _ in s.events), "a run in training was ended")
        with open(os.path.join(run, "metrics.jsonl"), "a") as f:
            for k, line in enumerate(lines[5:]):
                if k == 3:  # a line written in two parts: read once it is whole
                    f.write(line[:20])
                    f.flush()
                    time.sleep(0.4)
                    line = line[20:]
                f.write(line)
                f.flush()
                time.sleep(0.05)
            f.write('{"step": garbage}\n')  # a bad line: skipped, the stream goes on
            f.write(lines[-1].replace('"step":%d' % len(lines), '"step":%d' % (len(lines) + 1)))
        want = list(range(1, len(lines) + 2))
        check(s.wait(lambda e: s.steps() == want, 3), "steps while training: %s" % s.steps())
        os.rename(tl + ".later", tl)
        check(s.wait(lambda e: any(x == "timeline" for x, _ in e), 3), "no timeline event")
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        check(s.wait(lambda e: any(x == "end" for x, _ in e), 3), "no end after the lock went")
        check(s.steps() == want, "steps at the end: %s" % s.steps())
        s.close()
    finally:
        check(stop(proc) == 0, "serve exit")
    err = proc.stderr.read()
    check("metrics.jsonl line %d: malformed JSON (skipped)" % (len(lines) + 1) in err,
          "no warning about the bad line: %r" % err)


def real_trainer():
    run = os.path.join(TMP, "real")
    trainer = subprocess.Popen([K, "train", "--synthetic", "--stages", "2", "-m", "4", "--tf",
                                "5", "--tb", "5", "--tw", "5", "--steps", "60", "--no-live",
                                "--run-dir", run],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if os.path.exists(os.path.join(run, "metrics.jsonl")):
            break
        time.sleep(0.05)
    proc, port = serve([run, "--addr", "127.0.0.1:0"])
    try:
        s = Stream(port)
        check(s.wait(lambda e: bool(e), 5), "no hello")
        hello = s.events[0][1]["runs"][0] if s.events else {}
        check(hello.get("state") == "training (pid %d)" % trainer.pid,
              "hello of a real trainer's run: %r" % hello)
        check(s.wait(lambda e: any(x == "end" for x, _ in e), 60), "no end after the trainer")
        check(s.steps() == list(range(1, 61)), "steps of the real run: %s" % s.steps()[-5:])
        s.close()
    finally:
        check(trainer.wait(60) == 0, "the trainer failed: %s" % trainer.stderr.read()[-300:])
        check(stop(proc) == 0, "serve exit")


# ---- 5. signals -------------------------------------------------------------------------------

def signals(base):
    """One signal, or a burst (timeout -s INT and Slurm may send it twice; a
    terminal's Ctrl-C reaches every process of the group): exit 0 always."""
    for first, burst in ((signal.SIGINT, None), (signal.SIGTERM, None),
                         (signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGINT)):
        proc, port = serve([base, "--addr", "127.0.0.1:0"])
        held = slow_conns(port, 20, True)
        s = Stream(port)
        time.sleep(0.2)
        proc.send_signal(first)
        end = time.monotonic() + 1.0
        while burst and proc.poll() is None and time.monotonic() < end:
            try:
                proc.send_signal(burst)  # while the server closes
            except ProcessLookupError:
                break
            time.sleep(0.01)
        try:
            rc = proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        what = first.name + (" then a burst of " + burst.name if burst else "")
        check(rc == 0, "serve after %s: exit %s (want 0)" % (what, rc))
        s.close()
        for x in held:
            x.close()


def main():
    base = os.path.join(TMP, "base")
    train(base)
    os.remove(os.path.join(base, ".lock"))
    files(base)
    slowloris(base)
    remote(base)
    live_dir(base)
    real_trainer()
    signals(base)
    ktserve.finish("test_serve_attacks")


main()
