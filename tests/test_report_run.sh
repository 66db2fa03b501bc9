#!/usr/bin/env bash
# kaiten report RUN_DIR: the run report of a small training run parses as
# XML, refers to nothing outside itself, has the loss curve with one point per
# step and every validation point, the measured Gantt with one bar per event
# of timeline.json on every rank and the predicted one under it, the memory
# of the traced step, and the configuration; a long run is thinned, a torn
# last line of metrics.jsonl is skipped, a run without timeline.json still
# gets its curves, and bad input is one line on stderr with exit code 2.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
# one line on stderr that names $1
one_line() { if [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q -- "$1" "$tmp/err"; then ok; else
  bad "want one line naming '$1', got: $(cat "$tmp/err")"; fi; }

# check.py REPORT RUN_DIR [--long]: the report against the files it came from.
cat >"$tmp/check.py" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
path, run, long_run = sys.argv[1], sys.argv[2], "--long" in sys.argv
text = open(path, encoding="utf-8").read()
root = ET.fromstring(text)  # raises on malformed markup
for pat in (r"https?:", r"//", r"\bsrc\s*=", r"@import", r"url\(", r"<link\b", r"<img\b",
            r"\bhref\s*=", r"xlink:", r"<iframe\b", r"<object\b", r"<embed\b"):
    m = re.search(pat, text, re.I)
    assert not m, "external reference %r near %r" % (pat, text[max(0, m.start() - 60):m.end() + 60])
svg = {s.get("id"): s for s in root.iter("svg")}
steps = []
for line in open(run + "/metrics.jsonl"):
    try:
        steps.append(json.loads(line))
    except ValueError:
        pass  # the torn last line the report skips too
n, vals = len(steps), [s for s in steps if s["val_loss"] is not None]

def points(svg_el, series):
    """Points of one series' path: M/L commands (H/V for step series)."""
    for p in svg_el.iter("path"):
        if p.get("data-series") == str(series):
            return len(re.findall(r"[ML]", p.get("d")))
    return 0

loss = svg["chart-loss"]
for label in ("step", "loss"):
    assert label in "".join(loss.itertext()), "loss chart without axis title " + label
names = [t.text for t in loss.iter("text")]
val_series = 2 if "mean of" in " ".join(x or "" for x in names) else 1
dots = lambda s: [c for c in loss.iter("circle") if c.get("data-series") == str(s)]
vdots = dots(val_series)
assert [float(c.get("data-x")) for c in vdots] == [float(s["step"]) for s in vals], \
    "validation points %s vs %s" % ([c.get("data-x") for c in vdots], [s["step"] for s in vals])
for c, s in zip(vdots, vals):
    assert abs(float(c.get("data-y")) - s["val_loss"]) <= 1e-5 * abs(s["val_loss"]), c.attrib
if long_run:
    # thinned to at most four points per pixel column of the plot, smoothed line drawn
    width = float(loss.get("width"))
    got = points(loss, 0)
    assert 0 < got <= 4 * width and got < n, "%d loss points for %d steps" % (got, n)
    assert points(loss, 1) > 0 and val_series == 2, "no moving average over a long run"
else:
    assert points(loss, 0) == n, "loss path has %d points for %d steps" % (points(loss, 0), n)
    assert len(dots(0)) == n and [float(c.get("data-x")) for c in dots(0)] == \
        [float(s["step"]) for s in steps], "one dot per step"
assert len(vals) >= 2 or long_run, "the run should have validation points"
for cid in ("chart-throughput", "chart-bubble", "chart-lr", "chart-grad-norm", "chart-memory",
            "chart-comm", "bars-bytes", "bars-stages"):
    assert cid in svg, "missing chart " + cid
try:
    tl = json.load(open(run + "/timeline.json"))
except OSError:
    tl = None
g = svg.get("gantt-step")
if tl is None:
    assert g is None and "No timeline.json" in text, "a Gantt without timeline.json"
else:
    p = tl["measured"]["p"]
    want = [0] * p
    for e in tl["measured"]["events"]:
        want[e["rank"]] += 1
    got, pred = [0] * p, 0
    for r in g.iter("rect"):
        if r.get("data-pred") == "1":
            pred += int(r.get("data-n", "1"))
        elif r.get("data-rank") is not None:
            assert r.get("data-op") in ("F", "B", "I", "W"), r.attrib
            got[int(r.get("data-rank"))] += int(r.get("data-n", "1"))
    assert got == want, "measured bars per rank %s, events per rank %s" % (got, want)
    if g.get("data-mode") == "detail":
        assert pred == len(tl["predicted"]["events"]), "%d predicted bars, %d events" % (
            pred, len(tl["predicted"]["events"]))
    else:  # aggregated strips do not count their actions
        assert pred > 0, "no predicted strip"
    assert "time (" in "".join(g.itertext()), "Gantt time axis without unit"
    assert "memory-step" in svg and "bars-predicted" in svg
    mem = "".join(svg["memory-step"].itertext())
    assert (p > 8) == ("of %d ranks" % p in mem), "memory chart rank selection: " + mem
# the configuration: every scalar of config.json in its group's table
cfg = json.load(open(run + "/config.json"))
rows = {}
for table in root.find(".//section[@id='config']").iter("table"):
    group = table.find("caption").text
    for tr in table.iter("tr"):
        td = [c.text or "" for c in tr.findall("td")]
        if td:
            rows[(group, td[0])] = td[1]
def flat(prefix, o):
    for k, v in o.items():
        if isinstance(v, dict):
            yield from flat(k, v)
        else:
            yield (prefix or "run", k, v)
for group, key, v in flat("", cfg):
    if key == "segments":  # drawn as the layout table, not in the configuration
        continue
    shown = rows.get((group, key))
    if isinstance(v, bool):
        want = "true" if v else "false"
    elif isinstance(v, list):
        want = ", ".join("%g" % x for x in v) if v else "[]"
    elif v is None:
        want = "null"
    elif isinstance(v, (int, float)):
        want = "%.10g" % v
    else:
        want = v
    assert shown == want, "config %s.%s: report %r, config.json %r" % (group, key, shown, want)
summary = "".join(root.find(".//section[@id='summary']").itertext())
assert ("%d of %d" % (n, cfg["steps"])) in summary, summary
print("%s: %d steps, %d validation points, %d bytes" % (path, n, len(vals), len(text)))
PY

R="$tmp/run"
expect 0 "$K" train --model mlp --layers 4 --hidden 16 --stages 2 -m 4 --steps 12 --val-every 4 \
  --run-dir "$R"
expect 0 "$K" report "$R"
if [ -s "$R/report.html" ]; then ok; else bad "no $R/report.html (the default output)"; fi
if grep -q "report.html" "$tmp/out"; then ok; else bad "stdout does not name the report"; fi
if ls "$R" | grep -q '\.tmp'; then bad "temporary file left behind"; else ok; fi
python3 "$tmp/check.py" "$R/report.html" "$R" && ok || bad "run report structure"
expect 0 "$K" report "$R" -o "$tmp/r.html" --title "my run"
if grep -q "<h1>my run</h1>" "$tmp/r.html"; then ok; else bad "--title not used"; fi

# a torn last line (a crash mid-write) is skipped; the report says so
cp -r "$R" "$tmp/torn"
printf '{"step":13,"loss":0.3,"val_lo' >>"$tmp/torn/metrics.jsonl"
expect 0 "$K" report "$tmp/torn" -o "$tmp/torn.html"
python3 "$tmp/check.py" "$tmp/torn.html" "$tmp/torn" && ok || bad "torn run report"
if grep -q "torn line" "$tmp/torn.html"; then ok; else bad "torn line not mentioned"; fi

# a long run without timeline.json: curves thinned and smoothed, no Gantt
mkdir "$tmp/long"
cp "$R/config.json" "$tmp/long/"
python3 - "$tmp/long/metrics.jsonl" <<'PY'
import json, math, random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for s in range(1, 5001):
        f.write(json.dumps({"step": s, "loss": 2 * math.exp(-s / 800) + 0.1 * random.random(),
            "val_loss": 2 * math.exp(-s / 800) if s % 250 == 0 else None, "lr": 1e-3,
            "grad_norm": random.random(), "seconds": 0.01, "tokens_per_s": 1e4 * (1 + random.random()),
            "samples_per_s": 100, "bubble": 0.3 + 0.1 * random.random(),
            "ranks": [{"busy": 0.005, "bytes_sent": 4096, "comm_time": 1e-4, "peak_act_bytes": 2048 * (r + 1)}
                      for r in range(2)]}) + "\n")
PY
sed -i 's/"steps": 12/"steps": 5000/' "$tmp/long/config.json"
expect 0 "$K" report "$tmp/long"
python3 "$tmp/check.py" "$tmp/long/report.html" "$tmp/long" --long && ok || bad "long run report"
size=$(wc -c <"$tmp/long/report.html")
# 400 KB of charts, and up to 400 KB for the what-if panel's simulator
if [ "$size" -lt 800000 ]; then ok; else bad "5000-step report is $size bytes"; fi

# P = 32: the Gantt still has every event, memory shows 8 of 32 ranks
expect 0 "$K" train --model mlp --layers 32 --hidden 8 --stages 32 -m 32 --steps 2 --val-every 1 \
  --run-dir "$tmp/p32"
expect 0 "$K" report "$tmp/p32"
python3 "$tmp/check.py" "$tmp/p32/report.html" "$tmp/p32" && ok || bad "P=32 run report"

# bad input: one line naming the problem, exit code 2
expect 2 "$K" report "$tmp/nowhere"; one_line "nowhere"
expect 2 "$K" report; one_line "run directory"
expect 2 "$K" report "$R" "$R"; one_line "unexpected"
cp -r "$R" "$tmp/nometrics"; rm "$tmp/nometrics/metrics.jsonl"
expect 2 "$K" report "$tmp/nometrics"; one_line "metrics.jsonl"
cp -r "$R" "$tmp/noconfig"; rm "$tmp/noconfig/config.json"
expect 2 "$K" report "$tmp/noconfig"; one_line "config.json"
cp -r "$R" "$tmp/badconfig"; echo '{"model": {"kind": "mlp",' >"$tmp/badconfig/config.json"
expect 2 "$K" report "$tmp/badconfig"; one_line "config.json"
# a bad line is skipped with one warning naming it; the report has the other steps
cp -r "$R" "$tmp/badline"; sed -i '3s/.*/{"step": garbage}/' "$tmp/badline/metrics.jsonl"
expect 0 "$K" report "$tmp/badline"; one_line "metrics.jsonl line 3: malformed JSON (skipped)"
cp -r "$R" "$tmp/badtl"; echo 'not json' >"$tmp/badtl/timeline.json"
expect 2 "$K" report "$tmp/badtl"; one_line "timeline.json"
cp -r "$R" "$tmp/badev"; sed -i 's/"op":"F"/"op":"Q"/' "$tmp/badev/timeline.json"
expect 2 "$K" report "$tmp/badev"; one_line "timeline.json"
expect 1 "$K" report "$R" -o "$tmp/nowhere/x/report.html"; one_line "nowhere"

echo "test_report_run: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
