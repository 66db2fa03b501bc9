#!/usr/bin/env bash
# HTML reports from the CLI (kaiten sim/compare --report): well-formed XML,
# one Gantt per schedule with one bar per action on every rank (or, when
# aggregated, bar counts that add up to the rank's actions), comparison bars,
# memory charts, no external references, atomic writes, sizes at P=32 M=256.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"

# check.py REPORT [SCHEDULE JSON]...: structure of a report against the
# simulations of the same schedules (sim --format json events).
cat >"$tmp/check.py" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
path, pairs = sys.argv[1], sys.argv[2:]
text = open(path, encoding="utf-8").read()
root = ET.fromstring(text)  # raises on malformed markup
# no external references of any kind
for pat in (r"https?:", r"//", r"\bsrc\s*=", r"@import", r"url\(", r"<link\b", r"<img\b",
            r"<iframe\b", r"<object\b", r"<embed\b", r"\bhref\s*=", r"xlink:"):
    m = re.search(pat, text, re.I)
    assert not m, "external reference %r near %r" % (pat, text[max(0, m.start()-60):m.end()+60])
svgs = {s.get("id"): s for s in root.iter("svg")}
gantts = [s for s in root.iter("svg") if s.get("class") == "gantt"]
assert len(gantts) == len(pairs) // 2, "%d gantts for %d schedules" % (len(gantts), len(pairs) // 2)
for name, jpath in zip(pairs[::2], pairs[1::2]):
    d = json.load(open(jpath))
    g = svgs.get("gantt-" + name)
    assert g is not None, "no Gantt for " + name
    p = d["p"]
    assert int(g.get("data-p")) == p
    want = [0] * p
    for e in d["events"]:
        want[e["rank"]] += 1
    got = [0] * p
    for r in g.iter("rect"):
        if r.get("data-rank") is None:
            continue
        assert r.get("data-op") in ("F", "B", "I", "W"), r.attrib
        got[int(r.get("data-rank"))] += int(r.get("data-n", "1"))
    assert got == want, "%s: bars per rank %s, actions per rank %s" % (name, got, want)
    if g.get("data-mode") == "detail":
        for r in g.iter("rect"):
            if r.get("data-rank") is not None:
                assert r.get("data-stage") is not None and r.get("data-mb") is not None
    assert "time (" in "".join(g.itertext()), name + ": time axis without unit"
    assert svgs.get("memory-" + name) is not None, "no memory chart for " + name
n = len(pairs) // 2
if n > 1:
    for bid in ("bars-bubble", "bars-period", "bars-memory"):
        bars = [r for r in svgs[bid].iter("rect") if r.get("data-bar") is not None]
        assert len(bars) == n, "%s: %d bars for %d schedules" % (bid, len(bars), n)
    for name, jpath in zip(pairs[::2], pairs[1::2]):
        d = json.load(open(jpath))
        bar = [r for r in svgs["bars-bubble"].iter("rect") if r.get("data-label", "").startswith(name + ":")]
        assert bar and abs(float(bar[0].get("data-value")) - 100 * d["bubble_ratio"]) < 1e-3, name
else:
    assert svgs.get("utilisation") is not None
assert root.find(".//section[@id='config']") is not None
print("%s: %d Gantts, %d bytes" % (path, len(gantts), len(text)))
PY

# compare: the "Done when" command
expect 0 "$K" compare -p 4 -m 8 --report "$tmp/cmp.html"
if grep -q "^schedule" "$tmp/out"; then ok; else bad "compare --report lost the table on stdout"; fi
if ls "$tmp" | grep -q '\.tmp'; then bad "temporary file left behind"; else ok; fi
args=()
for s in $(python3 -c "
import re,sys; print(' '.join(re.findall(r'id=\"gantt-([a-z0-9-]+)\"', open(sys.argv[1]).read())))" "$tmp/cmp.html"); do
  "$K" sim --schedule "$s" -p 4 -m 8 --format json >"$tmp/$s.json" || bad "sim $s"
  args+=("$s" "$tmp/$s.json")
done
for s in gpipe 1f1b interleaved zb-h1 zb-h2 zbv; do
  if [ -f "$tmp/$s.json" ]; then ok; else bad "compare report lacks $s"; fi
done
python3 "$tmp/check.py" "$tmp/cmp.html" "${args[@]}" && ok || bad "compare report structure"

# sim: one schedule, interleaved (two chunks), with costs
expect 0 "$K" sim --schedule interleaved -p 4 -m 8 --tf 1,2,1,1,1,1,1,1 --comm 0.5 --report "$tmp/sim.html"
if grep -q "rank 3 |" "$tmp/out"; then ok; else bad "sim --report lost the ASCII chart"; fi
"$K" sim --schedule interleaved -p 4 -m 8 --tf 1,2,1,1,1,1,1,1 --comm 0.5 --format json >"$tmp/il.json"
python3 "$tmp/check.py" "$tmp/sim.html" interleaved "$tmp/il.json" && ok || bad "sim report structure"

# large: P=32 M=256 stays small, aggregates, and its counts still add up
expect 0 "$K" compare -p 32 -m 256 --schedules gpipe,1f1b,zb-h2,zbv --report "$tmp/big.html"
size=$(wc -c <"$tmp/big.html")
# 1.5 MB of charts, and up to 400 KB for the what-if panel's simulator
if [ "$size" -lt 1900000 ]; then ok; else bad "P=32 M=256 comparison report is $size bytes"; fi
args=()
for s in gpipe 1f1b zb-h2 zbv; do
  "$K" sim --schedule "$s" -p 32 -m 256 --format json >"$tmp/big-$s.json"
  args+=("$s" "$tmp/big-$s.json")
done
python3 "$tmp/check.py" "$tmp/big.html" "${args[@]}" && ok || bad "large report structure"
if grep -q 'data-mode="aggregate"' "$tmp/big.html"; then ok; else bad "large report not aggregated"; fi

# failures: unwritable path -> exit 1, one line naming it; bad options still exit 2
expect 1 "$K" sim -p 4 -m 4 --report "$tmp/no/such/dir/r.html"
if [ "$(wc -l <"$tmp/err")" -le 1 ] && grep -q "no/such/dir" "$tmp/err"; then ok; else bad "error: $(cat "$tmp/err")"; fi
expect 2 "$K" compare -p 4 -m 8 --report

echo "test_report_html: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
