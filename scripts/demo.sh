#!/usr/bin/env bash
# `make demo`: train a small GPT with a 4-stage 1F1B pipeline on the built-in
# corpus, then show what the pipeline did and what the model learned.
set -euo pipefail
B=${1:-build}
K="$B/kaiten"
RUN=${KAITEN_DEMO_RUN:-runs/demo}
STEPS=${KAITEN_DEMO_STEPS:-200}
# section titles in bold on a terminal, plain in a log
if [ -t 1 ]; then say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else say() { printf '\n== %s\n' "$*"; }; fi

say "Training a GPT (4 blocks, 64 channels, byte-level) on 4 pipeline stages, 1F1B, threads"
rm -rf "$RUN"
"$K" train --model gpt --stages 4 --schedule 1f1b --microbatches 8 --micro-batch-size 4 \
  --steps "$STEPS" --val-every 50 --run-dir "$RUN" --format ascii --checkpoint-every 100

say "What the trained model writes (kaiten sample)"
"$K" sample --run-dir "$RUN" --prompt "The chef " --tokens 240 --temperature 0.7

say "The same pipeline in the simulator: every schedule side by side (P=4, M=8)"
"$K" compare -p 4 -m 8 --tf 1 --tb 1 --tw 1

if "$K" report --help >/dev/null 2>&1; then
  "$K" report "$RUN" -o "$RUN/report.html" >/dev/null && echo "HTML report: $RUN/report.html"
fi
echo
echo "run directory: $RUN (config.json, metrics.jsonl, timeline.json, trace.json, checkpoints/)"
echo "continue it:   $K train --resume $RUN --steps $((STEPS * 2)) --stages 2 --schedule zb-h1"
echo "watch it live: add --serve 8080 to kaiten train and open http://127.0.0.1:8080/"
echo "see it in the browser (curves, stages, the step replayed on the conveyor belt):"
echo "  $K serve $RUN          # then open http://127.0.0.1:8080/"
