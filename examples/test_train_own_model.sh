#!/usr/bin/env bash
# example_train_own_model: the example trains (it exits non-zero unless its
# loss halved), and its run directory is one kaiten reads: kaiten report
# renders it, with the model's name, every step and the traced step, and
# kaiten serve shows it on the dashboard.
set -u
EX="$1" K="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "example_train_own_model: $*"; exit 1; }
"$EX" "$tmp/run" >"$tmp/out" 2>&1 || fail "the example failed: $(tail -3 "$tmp/out")"
cat "$tmp/out"
grep -q '"kind": "tanh-resnet"' "$tmp/run/config.json" || fail "config.json does not name the model"
[ "$(wc -l <"$tmp/run/metrics.jsonl")" = 40 ] || fail "metrics.jsonl does not hold the 40 steps"
[ -s "$tmp/run/timeline.json" ] || fail "no timeline.json"
"$K" report "$tmp/run" -o "$tmp/report.html" 2>"$tmp/err" || fail "kaiten report: $(cat "$tmp/err")"
grep -q 'tanh-resnet' "$tmp/report.html" || fail "the report does not name the model"
grep -qi 'zb-h1' "$tmp/report.html" || fail "the report does not name the schedule"
# the dashboard: the page, and the run's files under /runs/0/
command -v python3 >/dev/null || { echo "example_train_own_model: OK (serve not checked: no python3)"; exit 0; }
"$K" serve "$tmp/run" --addr 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 100); do grep -q http "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*/' "$tmp/serve.out")
got=$(python3 - "$url" 2>&1 <<'PY'
import sys, urllib.request
page = urllib.request.urlopen(sys.argv[1], timeout=10)
cfg = urllib.request.urlopen(sys.argv[1] + "runs/0/config.json", timeout=10).read()
print(page.status, b"tanh-resnet" in cfg)
PY
)
kill -TERM $pid 2>/dev/null
wait $pid 2>/dev/null
[ "$got" = "200 True" ] || fail "kaiten serve: $got $(cat "$tmp/serve.err")"
echo "example_train_own_model: trained, and kaiten report and kaiten report and serve read its run directory: OK"
