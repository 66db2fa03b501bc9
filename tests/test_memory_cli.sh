#!/usr/bin/env bash
# Memory as the user states it, through the CLI: --mem-limit in --mem-act
# units, as a fraction of 1F1B's peak (0.5x) and, in train, in bytes of the
# model's measured activations (with the predicted peak beside the measured
# one); bad values are one-line usage errors; compare lists the schedules
# that trade memory for bubble; v-half and zb-auto -v 2 train like the
# unpipelined model.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
py() { python3 -c "$1" || return 1; }
peak() { py "import json; print(json.load(open('$1'))['peak_memory'])"; }

# 1. a fraction of 1F1B's peak: 1F1B holds min(P, M) activations, 0.5x half of them
expect 0 "$K" sim --schedule zb-auto -p 8 -m 32 --mem-limit 0.5x --format json
cp "$tmp/out" "$tmp/half.json"
[ "$(peak "$tmp/half.json")" = 4 ] && ok || bad "zb-auto at 0.5x peaks at $(peak "$tmp/half.json"), not 4"
expect 0 "$K" sim --schedule zb-auto -p 8 -m 32 --mem-limit 4 --format json
cmp -s "$tmp/out" "$tmp/half.json" && ok || bad "0.5x and 4 activations differ"
# zb-auto with 2 chunks per rank in loop placement, zbv-auto in v placement
expect 0 "$K" sim --schedule zb-auto -p 4 -m 8 -v 2 --mem-limit 0.5x --format json
py "import json; d=json.load(open('$tmp/out')); assert d['v']==2 and d['placement']=='loop' and d['peak_memory']<=4+1e-12, d" && ok || bad "zb-auto -v 2"
expect 0 "$K" sim --schedule zbv-auto -p 4 -m 8 --format json
py "import json; d=json.load(open('$tmp/out')); assert d['v']==2 and d['placement']=='v' and d['peak_memory']<=8, d" && ok || bad "zbv-auto"

# 2. bad values: exit 2, one line naming the value
for v in abc 0x -1 1.5q 2GiB; do
  expect 2 "$K" sim --schedule zb-auto --mem-limit "$v"; oneline; has "$v" "$tmp/err"
done
expect 2 "$K" compare -p 4 -m 8 --mem-limit 1MiB; oneline
expect 2 "$K" train --synthetic --schedule zb-auto --mem-limit 1GiB --steps 1; oneline

# 3. compare lists the memory-saving schedules next to 1f1b
expect 0 "$K" compare -p 8 -m 32
for s in v-half v-min interleaved-zb zbv-auto zb-auto; do has "^$s " "$tmp/out"; done

# 4. train: bytes of the model's activations, and predicted beside measured peak
G="--model gpt --layers 6 --hidden 32 --heads 2 --seq-len 16 -m 8 -b 2 --val-every 0 --no-live"
expect 0 "$K" train $G --stages 4 --schedule zb-auto --mem-limit 1MiB --steps 2
has "peak activation memory per rank" "$tmp/out"
py "
lines = open('$tmp/out').read().split('peak activation memory per rank')[1].strip().splitlines()[2:6]
for l in lines:
    r, pred, meas = l.split()
    assert abs(float(pred) - float(meas)) <= 1e-3 * float(meas) and float(meas) <= 1.0, l
" && ok || bad "predicted and measured peaks: $(tail -6 "$tmp/out")"
expect 2 "$K" train $G --stages 4 --schedule zb-auto --mem-limit 1KiB --steps 1; oneline
has "the smallest it can keep to is" "$tmp/err"

# 5. v-half (P=4, V=2) and zb-auto -v 2 train with the unpipelined model's losses
J="--model gpt --layers 6 -m 8 --steps 4 --val-every 0 --format json"
"$K" train $J --stages 1 --schedule 1f1b >"$tmp/one.json" 2>/dev/null || bad "unpipelined run"
for sched in "--schedule v-half" "--schedule v-min" "--schedule zb-auto -v 2 --mem-limit 0.5x"; do
  "$K" train $J --stages 4 $sched >"$tmp/p.json" 2>"$tmp/p.err" || bad "$sched: $(tail -1 "$tmp/p.err")"
  py "import json
a = json.loads(open('$tmp/one.json').read().splitlines()[-1])['losses']
b = json.loads(open('$tmp/p.json').read().splitlines()[-1])['losses']
assert len(a) == len(b) == 4 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)" \
    && ok || bad "$sched: losses differ from the unpipelined run"
done
finish test_memory_cli
