#!/usr/bin/env bash
# Variable-length micro-batches on the real GPT: `kaiten train
# --doc-lengths lognormal:1:16:1024 --stages 2` (threads, the default GPT:
# L=4, C=64, 4 heads; --seq-len 1024 -b 1: micro-batches of 1,024 tokens,
# 1f1b, no memory limit for either) with `--packing fifo` against
# `--packing balanced` (LPT, then the order searched with the simulator for
# the run's own pipeline, the attention share calibrated on the run's
# second step), run in pairs on the same documents (--seed), fifo first
# in one pair and balanced first in the next, so the machine's drifting
# load hits both alike.
#
# Per pair: balanced's steady tokens/s over fifo's (the JSON's
# steady_tokens_per_s: the median step after the first), measured; the same
# ratio predicted by `kaiten sim` on the last step's micro-batches as each
# run ran them (their tokens and sum of squared lengths, in run order, each
# costing its load on the token model with balanced's calibrated share,
# unit stage times); the same ratio from train's own prediction of the last
# step (predicted_period: the simulator on the step's measured
# per-(stage, micro-batch) CPU seconds: what the step's ops cost, whatever
# the machine's other load did to its wall time); and each run's measured
# last step over that prediction. Prints medians (min-max) over the pairs.
# Usage: packing_gpt.sh [--quick] [--tsv FILE] [BUILD_DIR]; env M (16),
# SEEDS (1-12), STEPS (8).
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
m=${M:-16} seeds=${SEEDS:-$(seq 1 12)} steps=${STEPS:-8}
[ "$QUICK" = 1 ] && seeds="1 2" steps=5
docs=lognormal:1:16:1024
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/meas"; : >"$tmp/pred"; : >"$tmp/err"; : >"$tmp/ops"
echo "date $(date -u '+%Y-%m-%d %H:%M UTC'); load: $(uptime | sed 's/.*load average: //')"
for seed in $seeds; do
  order="fifo balanced"
  [ $((seed % 2)) = 0 ] && order="balanced fifo"
  for how in $order; do
    quiet "$tmp/log" "$K" train --doc-lengths "$docs" --stages 2 --seq-len 1024 -b 1 -m "$m" \
      --packing "$how" --steps "$steps" --val-every 0 --seed "$seed" --no-live --format json \
      -o "$tmp/$how.json"
  done
  # the last step's micro-batches in run order, each its load on the token model
  python3 - "$tmp/fifo.json" "$tmp/balanced.json" "$m" "$tmp" <<'EOF'
import json, sys
f, b = (json.load(open(p)) for p in sys.argv[1:3])
m, tmp = int(sys.argv[3]), sys.argv[4]
a, budget = b["attn_share"], 1024.0
for name, r in (("fifo", f), ("balanced", b)):
    mbs = r["microbatches"][:m]
    load = [(1 - a) * x["tokens"] / budget + a * x["attn_tokens2"] / budget ** 2 for x in mbs]
    row = ",".join("%.9g" % v for v in load)
    open("%s/%s.costs" % (tmp, name), "w").write(";".join([row, row]))
    open("%s/%s.tokens" % (tmp, name), "w").write(str(sum(x["tokens"] for x in mbs)))
EOF
  for how in fifo balanced; do
    c=$(cat "$tmp/$how.costs")
    "$K" sim -s 1f1b -p 2 -m "$m" --tf "$c" --tb "$c" --tw "$c" --format json >"$tmp/$how.sim"
  done
  python3 - "$tmp" <<'EOF' >"$tmp/pair"
import json, sys
t = sys.argv[1]
r = {h: json.load(open("%s/%s.json" % (t, h))) for h in ("fifo", "balanced")}
s = {h: json.load(open("%s/%s.sim" % (t, h))) for h in ("fifo", "balanced")}
tok = {h: float(open("%s/%s.tokens" % (t, h)).read()) for h in ("fifo", "balanced")}
meas = r["balanced"]["steady_tokens_per_s"] / r["fifo"]["steady_tokens_per_s"]
pred = (tok["balanced"] / s["balanced"]["period"]) / (tok["fifo"] / s["fifo"]["period"])
ef, eb = (r[h]["period"] / r[h]["predicted_period"] for h in ("fifo", "balanced"))
ops = (tok["balanced"] / r["balanced"]["predicted_period"]) / (tok["fifo"] / r["fifo"]["predicted_period"])
print(meas, pred, ops, ef, eb, r["balanced"]["attn_share"], r["balanced"]["attn_share_from"],
      r["fifo"]["median_step_seconds"], r["balanced"]["median_step_seconds"])
EOF
  read -r meas pred ops ef eb share from sf sb <"$tmp/pair"
  echo "$meas" >>"$tmp/meas"; echo "$pred" >>"$tmp/pred"; echo "$ops" >>"$tmp/ops"; echo "$ef" >>"$tmp/err"; echo "$eb" >>"$tmp/err"
  printf 'seed %d  balanced/fifo steady tokens/s: measured %.3f predicted %.3f on the ops'"'"' costs %.3f   step ms fifo %.1f balanced %.1f   measured/predicted last step: fifo %.3f balanced %.3f   attn-share %s from step %s\n' \
    "$seed" "$meas" "$pred" "$ops" "$(awk -v x="$sf" 'BEGIN{print 1e3*x}')" "$(awk -v x="$sb" 'BEGIN{print 1e3*x}')" "$ef" "$eb" "$share" "$((from + 1))"
done
read -r mm mlo mhi < <(stats <"$tmp/meas")
read -r pm plo phi < <(stats <"$tmp/pred")
read -r em elo ehi < <(stats <"$tmp/err")
read -r om olo ohi < <(stats <"$tmp/ops")
printf 'P=2 M=%d %s: balanced/fifo steady tokens/s measured %.3f (%.3f-%.3f), predicted %.3f (%.3f-%.3f), on the last step'"'"'s measured op costs %.3f (%.3f-%.3f); measured/predicted step %.3f (%.3f-%.3f)\n' \
  "$m" "$docs" "$mm" "$mlo" "$mhi" "$pm" "$plo" "$phi" "$om" "$olo" "$ohi" "$em" "$elo" "$ehi"
echo "load after: $(uptime | sed 's/.*load average: //')"
row "packing_gpt.balanced_vs_fifo.measured.m$m" "GPT P=2 1f1b M=$m $docs: balanced / fifo steady tokens/s, paired" \
  ratio "$mm" "$mlo" "$mhi" "target 1.15" 1.15
row "packing_gpt.balanced_vs_fifo.predicted.m$m" "GPT P=2 1f1b M=$m $docs: balanced / fifo tokens/s of the last step, simulated" \
  ratio "$pm" "$plo" "$phi" "target 1.15" 1.15
row "packing_gpt.balanced_vs_fifo.op_costs.m$m" "GPT P=2 1f1b M=$m $docs: balanced / fifo tokens/s of the last step, simulated on its measured op costs" \
  ratio "$om" "$olo" "$ohi" "target 1.15" 1.15
row "packing_gpt.measured_vs_predicted.m$m" "GPT P=2 1f1b M=$m: measured last step / train's predicted" \
  ratio "$em" "$elo" "$ehi" "target within 5%" 1
