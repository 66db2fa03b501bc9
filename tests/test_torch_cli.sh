#!/usr/bin/env bash
# PyTorch schedule files through the CLI: validate, sim, compare and train
# read them; torch-csv and torch-csv-comms write them.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
D="${KT_TEST_DATA:-tests/data}"
DV="$D/dualpipev_4rank_10mb.csv" ZB="$D/zb1p_2rank_2stagep_compute.csv"
LEG="$D/zb1p_2rank_2stagep_compute_legacy.csv"

# validate prints what it inferred
expect 0 "$K" validate "$DV";  has "placement v (inferred)" "$tmp/out"; has "8 stages (V=2), 10 micro-batches" "$tmp/out"
expect 0 "$K" validate "$ZB";  has "placement loop (inferred)" "$tmp/out"; has "notation current" "$tmp/out"
expect 0 "$K" validate "$LEG"; has "notation legacy" "$tmp/out"
expect 0 "$K" validate --schedule-file "$LEG"; has "notation legacy" "$tmp/out"
expect 2 "$K" validate "$LEG" --torch-notation current; oneline; has "two backwards" "$tmp/err"
expect 2 "$K" validate "$ZB" --torch-notation legacy;   oneline; has "I belongs to the current" "$tmp/err"
expect 2 "$K" validate "$ZB" --torch-notation newest;   oneline; has "'newest'" "$tmp/err"

# an explicit placement: named in the summary, a table in the JSON
printf '0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n2F0,3F0,3B0,2B0,2F1,3F1,3B1,2B1\n' >"$tmp/blocks.csv"
expect 0 "$K" validate "$tmp/blocks.csv"; has "placement explicit (stage:rank 0:0 1:0 2:1 3:1)" "$tmp/out"
expect 0 "$K" sim --schedule-file "$tmp/blocks.csv" --format json --per-stage
has '"placement":"explicit","stage_ranks":\[0,0,1,1\]' "$tmp/out"; has '"makespan":18,' "$tmp/out"

# each file re-exports identically; legacy converts to the current file
for f in "$DV" "$ZB"; do
  expect 0 "$K" sim --schedule-file "$f" --format torch-csv
  if cmp -s "$tmp/out" "$f"; then ok; else bad "$f does not re-export identically"; fi
done
expect 0 "$K" sim --schedule-file "$LEG" --format torch-csv
if cmp -s "$tmp/out" "$ZB"; then ok; else bad "legacy file does not convert to the current one"; fi
expect 0 "$K" sim --schedule-file "$LEG" --torch-notation legacy --format torch-csv
if cmp -s "$tmp/out" "$LEG"; then ok; else bad "legacy file does not re-export as legacy"; fi

# legacy and current simulate the same, with real costs
costs=(--tf 1,1.5,2,1 --tb 2,1,1,3 --tw 0.5 --comm 0.2)
"$K" sim --schedule-file "$ZB" "${costs[@]}" --format json 2>/dev/null | sed 's/"schedule":"[^"]*"//' >"$tmp/a.json"
"$K" sim --schedule-file "$LEG" "${costs[@]}" --format json 2>/dev/null | sed 's/"schedule":"[^"]*"//' >"$tmp/b.json"
if [ -s "$tmp/a.json" ] && cmp -s "$tmp/a.json" "$tmp/b.json"; then ok; else bad "legacy and current simulate differently"; fi

# overlapped cells: sequential by default, --overlap credits hiding
ms() { sed -n 's/.*"makespan":\([0-9.e+-]*\).*/\1/p' "$tmp/out"; }
expect 0 "$K" sim --schedule-file "$DV" --format json --per-stage; seq=$(ms)
expect 0 "$K" sim --schedule-file "$DV" --format json --per-stage --overlap 1; hid=$(ms)
if [ "$seq" = 66 ] && awk "BEGIN{exit !($hid < $seq)}"; then ok; else bad "overlap: sequential $seq, hidden $hid"; fi
expect 2 "$K" sim --schedule-file "$DV" --overlap 2; oneline; has "'2'" "$tmp/err"

# the lowered form validates for every built-in schedule on a grid, and a broken one does not
for s in gpipe 1f1b interleaved looped-bfs zb-h1 zb-h2 zbv dualpipev; do
  for p in 2 3 4; do for m in 4 8; do
    "$K" sim --schedule $s -p $p -m $m --format torch-csv-comms >"$tmp/l.csv" 2>/dev/null || continue
    if "$K" validate -q "$tmp/l.csv"; then ok; else bad "$s P=$p M=$m lowered form does not validate"; fi
  done; done
done
expect 0 "$K" sim --schedule 1f1b -p 2 -m 2 --format torch-csv-comms
has "0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD$" "$tmp/out"
has "1RECV_F0,1F0,1B0,1SEND_B0,.*,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1$" "$tmp/out"
sed 's/0RECV_B0,//' "$tmp/out" >"$tmp/broken.csv"
expect 2 "$K" validate "$tmp/broken.csv"; oneline; has "missing 0RECV_B0" "$tmp/err"

# compare: the file is one more row at its own P and M
expect 0 "$K" compare --schedule-file "$DV" --schedules 1f1b,zbv,dualpipev
has "dualpipev_4rank_10mb" "$tmp/out"; has "P=4 M=10" "$tmp/out"
expect 2 "$K" compare --schedule-file "$DV" -p 8; oneline; has "P=4 M=10" "$tmp/err"

# train: an imported schedule trains exactly like the unpipelined model
loss() { "$K" train --model mlp --steps 3 --no-live --format json "$@" 2>/dev/null |
         sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p'; }
# trains_like_unpipelined FILE M LAYERS: FILE's losses equal one stage's on
# the same global batch (M micro-batches of 4, in one piece)
trains_like_unpipelined() {
  local got ref
  got=$(loss --schedule-file "$1" --micro-batch-size 4 --layers "$3")
  ref=$(loss --stages 1 --schedule gpipe -m 1 --micro-batch-size $(($2 * 4)) --layers "$3")
  if [ -n "$got" ] && python3 - "$got" "$ref" <<'PY'
import sys
a = [float(x) for x in sys.argv[1].split(",")]; b = [float(x) for x in sys.argv[2].split(",")]
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)) else 1)
PY
  then ok; else bad "$1 trains to losses [$got], unpipelined [$ref]"; fi
}
trains_like_unpipelined "$DV" 10 8
trains_like_unpipelined "$ZB" 8 8
trains_like_unpipelined "$LEG" 8 8
# torch 2.15's own orders and lowered files train like the unpipelined model
# (their REDUCE_GRAD/WAIT_SEND/... actions are checked and set aside);
# ranks holding different numbers of stages too
printf '0F0,0F1,0B0,0B1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n1F0,1F1,1B0,1B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD\n' >"$tmp/gpipe.csv"
"$K" sim --schedule zbv -p 2 -m 4 --format torch-csv-comms -o "$tmp/zbv_comms.csv"
printf '0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n2F0,2B0,2F1,2B1\n' >"$tmp/uneven.csv"
trains_like_unpipelined "$tmp/gpipe.csv" 2 6
trains_like_unpipelined "$tmp/zbv_comms.csv" 4 6
trains_like_unpipelined "$tmp/uneven.csv" 2 6
expect 0 "$K" train --model mlp --layers 6 --steps 1 --no-live --schedule-file "$tmp/zbv_comms.csv"
has "lowered (torch 2.15 IR): .* communication actions, run in the file.s order" "$tmp/err"
expect 0 "$K" validate "$tmp/gpipe.csv"; has "4 REDUCE_GRAD/UNSHARD-style actions checked and set aside" "$tmp/out"
expect 0 "$K" validate "$tmp/uneven.csv"; has "3 stages (up to 2 per rank)" "$tmp/out"
has "explicit (stage:rank 0:0 1:0 2:1)" "$tmp/out"
expect 0 "$K" sim --schedule-file "$tmp/uneven.csv" --format json --per-stage; has '"makespan":13,' "$tmp/out"

# --torch-version: 2.15 (default) retires every send; older releases get SEND/RECV only
expect 0 "$K" sim --schedule 1f1b -p 2 -m 2 --format torch-csv-comms --torch-version 2.9
has "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1$" "$tmp/out"
if grep -q "WAIT\|REDUCE" "$tmp/out"; then bad "pre-2.15 form has 2.15 actions"; else ok; fi
cp "$tmp/out" "$tmp/old.csv"
expect 2 "$K" validate "$tmp/old.csv"; oneline; has "send never retired" "$tmp/err"
expect 0 "$K" validate "$tmp/old.csv" --torch-version 2.14
expect 2 "$K" sim --schedule 1f1b --torch-version two; oneline; has "torch version 'two'" "$tmp/err"

expect 2 "$K" train --model mlp --schedule-file "$DV" --stages 2; oneline; has "disagrees" "$tmp/err"
expect 2 "$K" train --model mlp --schedule-file "$DV" --schedule 1f1b; oneline
expect 2 "$K" train --model mlp --schedule-file "$tmp/nope.csv"; oneline; has "nope.csv" "$tmp/err"
finish test_torch_cli
