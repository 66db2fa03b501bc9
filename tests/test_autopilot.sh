#!/usr/bin/env bash
# The straggler autopilot (docs/runtime.md, "The autopilot"): faults that
# begin mid-run, per-link hops in the simulator, the culprit named at its
# onset step in metrics.jsonl, a switch of plan recorded and faster, and
# the GPT's losses bitwise those of the run without faults when the
# autopilot re-orders or re-partitions; bad fault specs are usage errors.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
# metrics.jsonl as python: lines m[i] (step i+1)
metric() { python3 -c "import json; m=[json.loads(l) for l in open('$1/metrics.jsonl')]; print($2)"; }

# --- the simulator: per-link hops and a slow link, by hand ------------------
# 1F1B, P=2, M=1, unit ops: F0 F1 B1 B0 with two hops: 6 + 2 hops
expect 0 "$K" sim -s 1f1b -p 2 -m 1 --comm 0.5 -f json -o "$tmp/a.json"
[ "$(json "$tmp/a.json" "float(d['makespan'])")" = 7.0 ] && ok || bad "one hop of 0.5: $(json "$tmp/a.json" "d['makespan']")"
expect 0 "$K" sim -s 1f1b -p 2 -m 1 --comm 0.5 --slow-link 0-1:+2 -f json -o "$tmp/b.json"
[ "$(json "$tmp/b.json" "float(d['makespan'])")" = 11.0 ] && ok || bad "a slow link: $(json "$tmp/b.json" "d['makespan']")"
[ "$(json "$tmp/b.json" "d['costs']['links']")" = "[2.5]" ] && ok || bad "links: $(json "$tmp/b.json" "d['costs']")"
# three links, the middle one slow: only hops across it pay (P=3, M=1: 4 hops, 2 on link 1-2)
expect 0 "$K" sim -s 1f1b -p 3 -m 1 --comm 0,3,0 -f json -o "$tmp/c.json"
[ "$(json "$tmp/c.json" "float(d['makespan'])")" = 15.0 ] && ok || bad "link 1-2 of 3: $(json "$tmp/c.json" "d['makespan']")"
# zb-auto orders around a slow link: faster than the order made without it
expect 0 "$K" sim -s zb-auto -p 4 -m 12 --tf 28,36,36,33 --tb 34,45,46,39 --tw 16,23,23,20 --mem-limit 6 -f text -o "$tmp/clean.txt"
expect 0 "$K" sim --schedule-file "$tmp/clean.txt" --tf 28,36,36,33 --tb 34,45,46,39 --tw 16,23,23,20 --slow-link 0-1:+120 -f json -o "$tmp/static.json"
expect 0 "$K" sim -s zb-auto -p 4 -m 12 --tf 28,36,36,33 --tb 34,45,46,39 --tw 16,23,23,20 --mem-limit 6 --slow-link 0-1:+120 -f json -o "$tmp/re.json"
python3 -c "
import json; s=json.load(open('$tmp/static.json'))['period']; r=json.load(open('$tmp/re.json'))
assert r['period'] < 0.8 * s and r['period'] <= 1.03 * r['lower_bound'], (s, r['period'], r['lower_bound'])" && ok || bad "zb-auto around the slow link"

# --- bad fault specs: one line, exit 2 ----------------------------------------
for spec in "--slow-link 0-2:+5" "--slow-link 0-1:+x" "--slow-link 0:+5" "--slow-rank 9:2" \
            "--slow-rank 1:0.5" "--slow-rank 1:2@0" "--slow-link 0-1:+5@x"; do
  # shellcheck disable=SC2086
  expect 2 "$K" train --synthetic -p 4 -m 4 --steps 2 --no-live $spec
  oneline
done
printf '0.1;0_1,1_2;0.01,0.02\n0.05;0_1,1_2;0.01,0.02\n' >"$tmp/back.trace"
expect 2 "$K" train --synthetic -p 4 -m 4 --steps 2 --no-live --fault-trace "$tmp/back.trace"
has "back.trace:2" "$tmp/err"
printf '0.1;0_1,1_2;0.01\n' >"$tmp/short.trace"
expect 2 "$K" train --synthetic -p 4 -m 4 --steps 2 --no-live --fault-trace "$tmp/short.trace"
has "2 links but 1 delays" "$tmp/err"
expect 2 "$K" sim -s 1f1b -p 4 --comm 1,2

# --- a slow rank from step 8: named at 8, re-partitioned, faster ----------------
syn=(--synthetic -p 4 -m 8 --schedule zb-auto --tf 4 --tb 4 --tw 4 --no-live --val-every 0)
expect 0 "$K" train "${syn[@]}" --layers 32 --slow-rank 2:2@8 --steps 16 --autopilot --run-dir "$tmp/rank"
metric "$tmp/rank" "[x['step'] for x in m if x.get('fault',{}).get('rank')==2]" >"$tmp/named"
metric "$tmp/rank" "m[8].get('fault')" >"$tmp/at6"  # step 9: over at 8 and 9
has "'rank': 2" "$tmp/at6"
has "'since': 8" "$tmp/at6"
metric "$tmp/rank" "[x.get('fault') for x in m[:8]]" >"$tmp/before"
has "^\[None, None, None, None, None, None, None, None\]$" "$tmp/before"
metric "$tmp/rank" "[(x['step'], x['switch']['kind'], x['switch']['partition']) for x in m if 'switch' in x]" >"$tmp/sw"
has "repartition" "$tmp/sw"
python3 -c "
import json, os; m=[json.loads(l) for l in open('$tmp/rank/metrics.jsonl')]
sw=[x for x in m if 'switch' in x]; assert len(sw)==1, sw
budget = 0.05 if os.environ.get('KT_SANITIZED') != '1' else 1  # instrumented planning is slower
i=sw[0]['step']; assert i <= 12, i  # over from 8, named at 9; in place three steps later (steps in flight)
slow=sorted(x['seconds'] for x in m[7:i-1]); fast=sorted(x['seconds'] for x in m[i:])
w=sw[0]['switch']; assert 0 <= w['replan_fraction'] < budget, w
assert 0 < w['replan_cpu_seconds'] <= w['replan_seconds'] + 1e-3, w  # its thread's CPU time, within its wall time
assert fast[0] < 0.85*slow[0], (slow, fast)  # each one's least disturbed step
# a loaded machine only adds time: its least disturbed step meets the prediction
assert abs(w['predicted_after'] - fast[0]) < 0.15*w['predicted_after'], (w, fast)" 2>"$tmp/why" && ok ||
  bad "re-partition: $(cat "$tmp/sw"): $(tail -1 "$tmp/why")"
has "switched before it: repartition" "$tmp/out"
has "slow: rank 2, its ops x[0-9.]* since step 8" "$tmp/out"

# --- a slow link from step 8: named, re-ordered -------------------------------
expect 0 "$K" train "${syn[@]}" --tf 4,4,4,4 --mem-limit 4 --slow-link 0-1:+30@8 --steps 15 --autopilot --run-dir "$tmp/link" -f json -o "$tmp/link.json"
metric "$tmp/link" "m[8].get('fault')" >"$tmp/l6"
has "'link': '0-1'" "$tmp/l6"
python3 -c "
import json; m=[json.loads(l) for l in open('$tmp/link/metrics.jsonl')]
f=m[8]['fault']; assert 0.025 < f['delay'] < 0.04 and f['since'] == 8, f
sw=[x for x in m if 'switch' in x]; assert len(sw)==1 and sw[0]['switch']['kind']=='reorder', sw
j=json.load(open('$tmp/link.json')); a=j['autopilot']; assert a['switches']==1, a
assert a['last_switch']['to'] == 'zb-auto', a" && ok || bad "slow link: $(metric "$tmp/link" "[x.get('switch') for x in m]")"

# --- a trace: delays change over time, the link named is one that has them ------
# (from 0.3 s after step 8 begins: after the calibration's steps 2-7)
printf '0.0;0_1,1_2,2_3;0,0,0\n0.3;0_1,1_2,2_3;0,0.03,0\n' >"$tmp/t.trace"
expect 0 "$K" train "${syn[@]}" --fault-trace "$tmp/t.trace@8" --steps 14 --run-dir "$tmp/trace"
metric "$tmp/trace" "[x.get('fault',{}).get('link') for x in m]" >"$tmp/tl"
has "'1-2'" "$tmp/tl"
python3 -c "
import json; m=[json.loads(l) for l in open('$tmp/trace/metrics.jsonl')]
assert all('fault' not in x for x in m[:8]), m[:8]" && ok || bad "trace named before its step: $(cat "$tmp/tl")"

# --- losses bitwise: re-partition and re-order change no arithmetic --------------
gpt=(--layers 6 --hidden 64 --heads 2 --seq-len 32 -p 2 -m 4 -b 2 --steps 18 --no-live --val-every 0 -f json)
expect 0 "$K" train "${gpt[@]}" -o "$tmp/g0.json"
expect 0 "$K" train "${gpt[@]}" --slow-rank 1:4@8 --autopilot --run-dir "$tmp/g1" -o "$tmp/g1.json"
expect 0 "$K" train "${gpt[@]}" --schedule zb-auto --mem-limit 2x --slow-link 0-1:+40@8 --autopilot --run-dir "$tmp/g2" -o "$tmp/g2.json"
for g in g1 g2; do
  python3 -c "
import json; a=json.load(open('$tmp/g0.json'))['losses']; b=json.load(open('$tmp/$g.json'))['losses']
assert len(a)==18 and a==b, (a, b)" && ok || bad "$g: losses differ from the run without faults"
done
# which plan the GPT switches to follows its measured ops: under a
# sanitizer (KT_SANITIZED) they are no timing reference, and a busy loop
# of the slow rank starves its neighbour's instrumented ops (the moves
# themselves are checked under it by test_replan)
timed=1
[ "${KT_SANITIZED:-0}" = 1 ] && timed=0
if [ $timed = 1 ]; then
  metric "$tmp/g1" "[x['switch']['kind'] for x in m if 'switch' in x]" >"$tmp/g1sw"
  has "repartition" "$tmp/g1sw"
  # a slow link: a new order, or a new partition with its order when the
  # stages as measured make that one faster
  metric "$tmp/g2" "[x['switch']['kind'] for x in m if 'switch' in x]" >"$tmp/g2sw"
  grep -q "reorder\|repartition" "$tmp/g2sw" && ok ||
    bad "g2: no switch: $(metric "$tmp/g2" "[(x['step'], x.get('fault'), x.get('switch')) for x in m if 'switch' in x or 'fault' in x][:5]")"
fi

# --- MPI: world rank 0 plans, every rank switches, units move between processes ---
if [ -n "${KT_MPIEXEC:-}" ]; then
  mpi=("$KT_MPIEXEC" -np 2 "$K" train --transport mpi "${gpt[@]}")
  expect 0 "${mpi[@]}" --slow-rank 1:4@8 --autopilot --run-dir "$tmp/m1" -o "$tmp/m1.json"
  python3 -c "
import json; a=json.load(open('$tmp/g0.json'))['losses']; b=json.load(open('$tmp/m1.json'))['losses']
assert a==b, (a, b)" && ok || bad "MPI: losses differ from the threads run without faults"
  if [ $timed = 1 ]; then
    metric "$tmp/m1" "[x['switch']['kind'] for x in m if 'switch' in x]" >"$tmp/m1sw"
    has "repartition" "$tmp/m1sw"
  fi
fi

finish test_autopilot
