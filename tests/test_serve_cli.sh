#!/usr/bin/env bash
# kaiten serve and train --serve from the command line: usage errors (exit 2,
# one line), a port in use (exit 1, one line naming it, nothing trained),
# serve answering and stopping cleanly on SIGTERM, and a live run whose
# event stream a client reads to the end (every step, in order, then end).
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_serve_cli: SKIP: needs python3"; exit 77; }

"$K" train --model mlp --layers 4 --hidden 16 --stages 2 -m 4 --steps 12 --val-every 4 \
  --run-dir "$tmp/run" >/dev/null || bad "train --run-dir failed"

expect 2 "$K" serve;                               oneline; has "run directory" "$tmp/err"
expect 2 "$K" serve "$tmp/nonexistent";            oneline; has "nonexistent" "$tmp/err"
expect 2 "$K" serve "$tmp/run" --addr nonsense;    oneline; has "nonsense" "$tmp/err"
expect 2 "$K" serve "$tmp/run" --addr 127.0.0.1:70000; oneline
expect 2 "$K" serve "$tmp/run" --max-clients 0;    oneline
expect 2 "$K" train --model mlp --serve host.example:80 --steps 1; oneline; has "serve" "$tmp/err"
expect 0 "$K" serve --help;                        has "RUN_DIR" "$tmp/out"

# serve: the address it prints answers; SIGTERM stops it with exit 0
"$K" serve "$tmp/run" --addr 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 300); do grep -q http "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*/' "$tmp/serve.out")
port=${url##*:}; port=${port%/}
if [ -n "$url" ]; then ok; else bad "serve printed no address: $(cat "$tmp/serve.out" "$tmp/serve.err")"; fi
code=$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1]).status)" "$url" 2>&1)
[ "$code" = 200 ] && ok || bad "GET / answered $code"

# the same port again: a clear error, exit 1; train --serve there trains nothing
expect 1 "$K" serve "$tmp/run" --addr "127.0.0.1:$port"; oneline; has "in use" "$tmp/err"
expect 1 "$K" train --model mlp --layers 4 --hidden 16 --stages 2 -m 4 --steps 3 --no-live \
  --serve "$port"; oneline; has "127.0.0.1:$port is already in use" "$tmp/err"
if grep -q "^step" "$tmp/out"; then bad "train ran with its dashboard address in use"; else ok; fi

kill -TERM $pid
t0=$(date +%s%N)
wait $pid; rc=$?
[ $rc = 0 ] && ok || bad "serve exited $rc on SIGTERM"
[ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000 ] && ok || bad "serve took over 3 s to stop"

# read_stream URL N: the stream from hello to end holds steps 1..N in order
read_stream() {
  python3 - "$1events" "$2" <<'PY'
import json, sys, urllib.request
n, events, steps = int(sys.argv[2]), [], []
with urllib.request.urlopen(sys.argv[1], timeout=60) as r:
    ev = None
    for raw in r:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: "):
            d = json.loads(line[6:])
            events.append(ev)
            if ev == "step":
                steps.append(d["step"])
            if ev == "end":
                assert d["steps"] == len(steps) and d["reason"] == "finished", d
                break
assert events[0] == "hello", events[:3]
assert steps == list(range(1, n + 1)), steps
assert "timeline" in events and events[-1] == "end", events[-5:]
print("stream: %d events, %d steps" % (len(events), len(steps)))
PY
}

# train --serve: a client reads the stream from the first step to the end
"$K" train --synthetic --stages 2 -m 4 --tf 1 --tb 1 --tw 1 --steps 100 --no-live --serve 0 \
  >"$tmp/train.out" 2>"$tmp/train.err" &
pid=$!
for _ in $(seq 600); do grep -q http "$tmp/train.err" 2>/dev/null && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.:]*/' "$tmp/train.err")
read_stream "$url" 100 >"$tmp/stream.txt" 2>&1 && ok || bad "the live stream: $(tail -3 "$tmp/stream.txt")"
wait $pid; rc=$?
[ $rc = 0 ] && ok || bad "train --serve exited $rc: $(tail -3 "$tmp/train.err")"
has "live dashboard at http://127.0.0.1:" "$tmp/train.err"

# a resumed run: the steps already in its run directory come first
"$K" train --stages 2 -m 4 -b 2 --steps 3 --val-every 0 --run-dir "$tmp/gpt" >/dev/null ||
  bad "train --run-dir (GPT) failed"
"$K" train --resume "$tmp/gpt" --steps 80 --stages 2 -m 4 -b 2 --val-every 0 --no-live \
  --serve 0 >"$tmp/train.out" 2>"$tmp/train.err" &
pid=$!
for _ in $(seq 600); do grep -q http "$tmp/train.err" 2>/dev/null && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.:]*/' "$tmp/train.err")
read_stream "$url" 80 >"$tmp/stream.txt" 2>&1 && ok || bad "the resumed run's stream: $(tail -3 "$tmp/stream.txt")"
wait $pid; rc=$?
[ $rc = 0 ] && ok || bad "train --resume --serve exited $rc: $(tail -3 "$tmp/train.err")"
finish test_serve_cli
