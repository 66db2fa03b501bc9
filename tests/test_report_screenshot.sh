#!/usr/bin/env bash
# Renders a comparison report and a training run's report (kaiten report
# RUN_DIR) in headless Chromium: each screenshot must not be blank (many
# colours, the F and B bar colours present, a fair share of non-white
# pixels) and each page must raise no script errors (its script marks
# <body data-kt="ready">; the console log has no "Uncaught").
# The model is wide enough (hidden 256) that compute, not message latency,
# fills the traced step, so both bar colours show even on a loaded machine.
# Skips (exit 77) when Chromium is not installed.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"

browser=$(find_chromium)
if [ -z "$browser" ]; then # scripts/deps.sh installs it; a test never does
  echo "test_report_screenshot: SKIP: Chromium is not installed (scripts/deps.sh installs it)"
  exit 77
fi

"$K" compare -p 4 -m 8 --report "$tmp/cmp.html" >/dev/null || bad "compare --report failed"
"$K" train --model mlp --layers 4 --hidden 256 --stages 2 -m 4 --steps 12 --val-every 4 \
  --run-dir "$tmp/run" >/dev/null || bad "train --run-dir failed"
"$K" report "$tmp/run" -o "$tmp/run.html" >/dev/null || bad "report RUN_DIR failed"
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --hide-scrollbars --enable-logging=stderr --v=0 --virtual-time-budget=3000)
# shoot NAME HEIGHT: NAME.html to NAME.png in a 1400 x HEIGHT window, and its DOM
shoot() {
  timeout 120 "$browser" "${flags[@]}" --user-data-dir="$tmp/profile-$1-1" \
    --window-size=1400,"$2" --screenshot="$tmp/$1.png" "file://$tmp/$1.html" \
    >"$tmp/$1.shot.out" 2>"$tmp/$1.shot.err"
  if [ -s "$tmp/$1.png" ]; then ok; else bad "$1: no screenshot: $(tail -5 "$tmp/$1.shot.err")"; fi
  timeout 120 "$browser" "${flags[@]}" --user-data-dir="$tmp/profile-$1-2" \
    --window-size=1400,"$2" --dump-dom "file://$tmp/$1.html" >"$tmp/$1.dom" 2>"$tmp/$1.dom.err"
  if grep -q 'data-kt="ready"' "$tmp/$1.dom"; then ok; else
    bad "$1: the page script did not run to the end: $(grep -o '<body[^>]*>' "$tmp/$1.dom")"; fi
  if grep -i "uncaught" "$tmp/$1.shot.err" "$tmp/$1.dom.err"; then bad "$1: script errors (above)"
  else ok; fi
}
shoot cmp 1000
shoot run 2400 # down to the traced step's Gantt

# PNG check with the standard library only (zlib), no imaging package.
cat >"$tmp/png.py" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, []
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    pos += 12 + n
    if typ == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif typ == b"IDAT":
        idat.append(body)
assert depth == 8 and interlace == 0 and ctype in (2, 6), (depth, ctype, interlace)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(b"".join(idat)), w * bpp
prev, colours, white, counts = bytearray(stride), set(), 0, {}
want = {"F": (0x00, 0x72, 0xB2), "B": (0xE6, 0x9F, 0x00)}
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for i in range(bpp, stride): line[i] = (line[i] + line[i - bpp]) & 255
    elif f == 2:
        line = bytearray((a + b) & 255 for a, b in zip(line, prev))
    elif f == 3:
        for i in range(stride): line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
    elif f == 4:
        for i in range(stride):
            a, b = (line[i - bpp] if i >= bpp else 0), prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        colours.add(px)
        if px == (255, 255, 255): white += 1
        for k, v in want.items():
            if px == v: counts[k] = counts.get(k, 0) + 1
inked = 1 - white / (w * h)
print(sys.argv[1].rsplit("/", 1)[-1] + ": %dx%d: %d colours, %.1f%% non-white, F px %d, B px %d"
      % (w, h, len(colours), 100 * inked, counts.get("F", 0), counts.get("B", 0)))
assert len(colours) >= 32, "only %d colours" % len(colours)
assert 0.05 <= inked <= 0.95, "non-white share %.3f" % inked
assert counts.get("F", 0) >= 500 and counts.get("B", 0) >= 500, counts
PY
for name in cmp run; do
  python3 "$tmp/png.py" "$tmp/$name.png" && ok || bad "$name: screenshot looks blank or wrong"
done

echo "test_report_screenshot: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
