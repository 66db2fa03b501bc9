"""Helpers of the Python tests that drive kaiten serve (serve_attacks.py,
readers_check.py, serve_latest.py): counted checks, starting and stopping
serve, plain HTTP requests and an event-stream reader, over loopback only."""
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time

K = None  # the kaiten binary: set by the test
checks = fails = 0


def check(cond, what):
    global checks, fails
    checks += 1
    if not cond:
        fails += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def finish(name):
    print("%s: %d checks, %d failed: %s" % (name, checks, fails, "FAIL" if fails else "OK"))
    raise SystemExit(1 if fails else 0)


def serve(args, wait_url=True):
    """Starts kaiten serve ARGS; returns (proc, port)."""
    proc = subprocess.Popen([K, "serve"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if not wait_url:
        return proc, None
    line = proc.stdout.readline()
    m = re.search(r"http://[0-9.]+:(\d+)/", line)
    if not m:
        raise RuntimeError("serve printed no address: %r %s" % (line, proc.stderr.read()))
    return proc, int(m.group(1))


def stop(proc, sig=signal.SIGTERM, timeout=5):
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def request(port, path, host="127.0.0.1", timeout=5, src=None):
    """One HTTP/1.0 request; (status, body bytes, seconds)."""
    t0 = time.monotonic()
    s = socket.socket()
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    try:
        s.connect(("127.0.0.1", port))
        hdr = "GET %s HTTP/1.0\r\n" % path + ("Host: %s\r\n" % host if host else "") + "\r\n"
        s.sendall(hdr.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return (-1, str(e).encode(), time.monotonic() - t0)
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.\d (\d+)", data)
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    return (int(m.group(1)) if m else -1, body, time.monotonic() - t0)


class Stream:
    """Reads /events in a thread; events is a list of (event, data)."""

    def __init__(self, port):
        self.events, self.closed = [], False
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(b"GET /events HTTP/1.0\r\nHost: localhost\r\n\r\n")
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        buf, ev = b"", None
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.decode(errors="replace")
                    if line.startswith("event: "):
                        ev = line[7:]
                    elif line.startswith("data: "):
                        self.events.append((ev, json.loads(line[6:])))
        except OSError:
            pass
        self.closed = True

    def wait(self, pred, secs):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if pred(self.events):
                return True
            time.sleep(0.05)
        return pred(self.events)

    def steps(self):
        return [d["step"] for e, d in self.events if e == "step"]

    def close(self):
        self.sock.close()


