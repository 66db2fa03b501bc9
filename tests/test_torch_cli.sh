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
expect 0 "$K" sim --schedule-file "$tmp/blocks.csv" --format json
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
expect 0 "$K" sim --schedule-file "$DV" --format json; seq=$(ms)
expect 0 "$K" sim --schedule-file "$DV" --format json --overlap 1; hid=$(ms)
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
has "1RECV_F0,1F0,1B0,1SEND_B0" "$tmp/out"
sed 's/0RECV_B0,//' "$tmp/out" >"$tmp/broken.csv"
expect 2 "$K" validate "$tmp/broken.csv"; oneline; has "missing 0RECV_B0" "$tmp/err"

# compare: the file is one more row at its own P and M
expect 0 "$K" compare --schedule-file "$DV" --schedules 1f1b,zbv,dualpipev
has "dualpipev_4rank_10mb" "$tmp/out"; has "P=4 M=10" "$tmp/out"
expect 2 "$K" compare --schedule-file "$DV" -p 8; oneline; has "P=4 M=10" "$tmp/err"

# train: an imported schedule trains exactly like the unpipelined model
loss() { "$K" train --model mlp --steps 3 --no-live --format json "$@" 2>/dev/null |
         sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p'; }
# the unpipelined reference sees the same global batch (M micro-batches of 4) in one piece
for fm in "$DV:10" "$ZB:8" "$LEG:8"; do
  f=${fm%:*} m=${fm##*:}
  got=$(loss --schedule-file "$f" --micro-batch-size 4 --layers 8)
  ref=$(loss --stages 1 --schedule gpipe -m 1 --micro-batch-size $((m * 4)) --layers 8)
  if [ -n "$got" ] && python3 - "$got" "$ref" <<'PY'
import sys
a = [float(x) for x in sys.argv[1].split(",")]; b = [float(x) for x in sys.argv[2].split(",")]
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)) else 1)
PY
  then ok; else bad "$f trains to losses [$got], unpipelined [$ref]"; fi
done
expect 2 "$K" train --model mlp --schedule-file "$DV" --stages 2; oneline; has "disagrees" "$tmp/err"
expect 2 "$K" train --model mlp --schedule-file "$DV" --schedule 1f1b; oneline
expect 2 "$K" train --model mlp --schedule-file "$tmp/nope.csv"; oneline; has "nope.csv" "$tmp/err"
finish test_torch_cli
