#!/usr/bin/env bash
# Variable-length micro-batches: documents of lognormal:1:16:1024 tokens
# packed into M micro-batches of 1,024 tokens at P=4, 1F1B, `fifo` against
# `balanced` on the same documents (--seed), predicted by `kaiten sim` and
# measured by `kaiten train --synthetic` (every op sleeps its micro-batch's
# cost: --tf/--tb/--tw 2 ms for a micro-batch of one 1,024-token document),
# paired per seed. attn-share 0.73 is the default GPT's own (its FLOP model,
# kt_model_unit_flops: T (24 C^2 + 4 T C) per layer, so 4NC / (24C^2 + 4NC)
# at C = 64, N = 1,024), 0.25 a model with a wider hidden size. Prints, per
# case, the median over seeds of balanced's tokens/s over fifo's (predicted
# and measured) and of the measured steady step over the predicted one.
# Usage: packing.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
seeds=$(seq 1 7) cases=("8 0.73" "8 0.25" "16 0.25") steps=14
[ "$QUICK" = 1 ] && seeds=$(seq 1 2) cases=("8 0.73") steps=6
docs=lognormal:1:16:1024
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for case in "${cases[@]}"; do
  read -r m attn <<<"$case"
  : >"$tmp/pred" ; : >"$tmp/meas" ; : >"$tmp/err"
  for seed in $seeds; do
    for how in fifo balanced; do
      flags=(-s 1f1b -p 4 -m "$m" --tf 2 --tb 2 --tw 2 --doc-lengths "$docs" --seed "$seed" --packing "$how"
        --attn-share "$attn")
      "$K" sim "${flags[@]}" --format json >"$tmp/sim.json"
      # the same flags: train packs the same documents in the same order
      "$K" train --synthetic --schedule 1f1b --stages 4 -m "$m" --tf 2 --tb 2 --tw 2 \
        --doc-lengths "$docs" --seed "$seed" --packing "$how" --attn-share "$attn" --steps "$steps" --no-live \
        --format json -o "$tmp/train_$how.json" >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
      python3 - "$tmp/sim.json" "$tmp/train_$how.json" "$how" >>"$tmp/pairs" <<'EOF'
import json, sys
sim, tr = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
tokens = sim["packing"]["step_tokens"]
pred_ms = sim["period"]            # --tf etc. are in ms
meas_ms = 1e3 * tr["median_step_seconds"]
print(sys.argv[3], tokens / pred_ms, tokens / meas_ms, meas_ms / pred_ms)
EOF
    done
    # the seed's pair: balanced over fifo, predicted and measured
    tail -2 "$tmp/pairs" | python3 -c '
import sys
rows = dict((l.split()[0], [float(x) for x in l.split()[1:]]) for l in sys.stdin)
f, b = rows["fifo"], rows["balanced"]
print(b[0] / f[0], b[1] / f[1], f[2], b[2])' >"$tmp/pair"
    read -r p r ef eb <"$tmp/pair"
    echo "$p" >>"$tmp/pred"; echo "$r" >>"$tmp/meas"; echo "$ef" >>"$tmp/err"; echo "$eb" >>"$tmp/err"
    printf 'M=%-3d attn %s seed %d  balanced/fifo tokens/s: predicted %.3f measured %.3f   measured/predicted step: fifo %.3f balanced %.3f\n' \
      "$m" "$attn" "$seed" "$p" "$r" "$ef" "$eb"
  done
  read -r pm plo phi < <(stats <"$tmp/pred")
  read -r mm mlo mhi < <(stats <"$tmp/meas")
  read -r em elo ehi < <(stats <"$tmp/err")
  printf 'M=%d attn-share %s: balanced/fifo predicted %.3f (%.3f-%.3f) measured %.3f (%.3f-%.3f); measured/predicted step %.3f (%.3f-%.3f)\n' \
    "$m" "$attn" "$pm" "$plo" "$phi" "$mm" "$mlo" "$mhi" "$em" "$elo" "$ehi"
  row "packing.balanced_vs_fifo.predicted.m$m.a$attn" "P=4 1f1b M=$m $docs attn-share $attn: balanced / fifo tokens/s, simulated" \
    ratio "$pm" "$plo" "$phi" "target 1.15" 1.15
  row "packing.balanced_vs_fifo.measured.m$m.a$attn" "P=4 1f1b M=$m $docs attn-share $attn --synthetic: balanced / fifo steady tokens/s" \
    ratio "$mm" "$mlo" "$mhi" "target 1.15" 1.15
  row "packing.measured_vs_predicted.m$m.a$attn" "P=4 1f1b M=$m attn-share $attn --synthetic: measured step / simulated step (fifo and balanced)" \
    ratio "$em" "$elo" "$ehi" "target within 5%" 1
done
