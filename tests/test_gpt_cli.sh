#!/usr/bin/env bash
# The GPT through kaiten train/sample as a user runs it: the loss falls on the
# built-in corpus, checkpoints continue bitwise and resume under another
# layout, damaged checkpoints are refused, sampling is deterministic.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
last() { tail -n 1 "$1"; }
py() { python3 -c "$1" || return 1; }

# 1. the default GPT (4 stages, 1f1b) learns the built-in corpus: from ln(256)=5.55
#    to below 2.5 within 100 steps (seeded, deterministic)
if [ "${KT_SANITIZED:-0}" = 1 ]; then
  echo "test_gpt_cli: the 100-step learning check runs in the Release suite only"
elif "$K" train --steps 100 --val-every 50 --format json >"$tmp/learn.json" 2>"$tmp/learn.err"; then
  last "$tmp/learn.json" >"$tmp/l.json"
  py "import json; d=json.load(open('$tmp/l.json')); l=d['losses']
assert len(l)==100 and l[0]>5.0 and l[-1]<2.5 and d['val_loss']<2.6, (l[0], l[-1], d['val_loss'])" && ok || bad "loss did not fall below 2.5"
else bad "default gpt run failed: $(tail -2 "$tmp/learn.err")"; fi

G="--layers 2 --hidden 32 --heads 2 --seq-len 16 -m 4 -b 2 --val-every 0 --format json"
# 2. bitwise continuation under the same layout
"$K" train $G --stages 2 --steps 6 >"$tmp/full.json" 2>/dev/null || bad "full run"
"$K" train $G --stages 2 --steps 3 --decay-steps 6 --run-dir "$tmp/run" >/dev/null 2>&1 || bad "first half"
cp -r "$tmp/run" "$tmp/run2"
"$K" train --resume "$tmp/run" --stages 2 -m 4 -b 2 --val-every 0 --format json --steps 6 >"$tmp/resumed.json" 2>"$tmp/resume.err" || bad "resume: $(tail -1 "$tmp/resume.err")"
py "import json
a=json.loads(open('$tmp/full.json').read().splitlines()[-1])['losses'][3:]
b=json.loads(open('$tmp/resumed.json').read().splitlines()[-1])['losses']
assert a==b, (a, b)" && ok || bad "resumed losses are not bitwise equal"
# 2b. where the rank threads run (pinned to cores, or --no-pin) changes no bit
"$K" train $G --stages 2 --steps 6 --no-pin >"$tmp/nopin.json" 2>"$tmp/nopin.err" || bad "--no-pin: $(tail -1 "$tmp/nopin.err")"
py "import json
a=json.loads(open('$tmp/full.json').read().splitlines()[-1])['losses']
b=json.loads(open('$tmp/nopin.json').read().splitlines()[-1])['losses']
assert a==b and len(a)==6, (a, b)" && ok || bad "--no-pin changed the losses"
# 3. resume under another P and schedule: equal to 1e-5
"$K" train --resume "$tmp/run2" --stages 4 --schedule zb-h1 -m 4 -b 2 --val-every 0 --format json --steps 6 >"$tmp/other.json" 2>"$tmp/other.err" || bad "resume P=4: $(tail -1 "$tmp/other.err")"
py "import json
a=json.loads(open('$tmp/full.json').read().splitlines()[-1])['losses'][3:]
b=json.loads(open('$tmp/other.json').read().splitlines()[-1])['losses']
assert len(a)==len(b)==3 and all(abs(x-y)<=1e-5*abs(x) for x,y in zip(a,b)), (a, b)" && ok || bad "resume under P=4 zb-h1 differs"
# 4. a truncated newest checkpoint is passed over with one warning naming
# it, and the run resumes from the newest intact one (test_resume_safety.sh
# covers the other damages)
ck=$(ls "$tmp/run/checkpoints"/step_*.ckpt | tail -1)
head -c 1000 "$ck" >"$tmp/t.ckpt" && cp "$tmp/t.ckpt" "$ck"
"$K" train --resume "$tmp/run" --stages 2 -m 4 -b 2 --steps 9 >"$tmp/tr.out" 2>"$tmp/tr.err"
rc=$?
if [ $rc = 0 ] && grep -q "warning: checkpoints/$(basename "$ck"): truncated" "$tmp/tr.err" &&
   [ "$(wc -l <"$tmp/tr.err")" -le 1 ]; then ok; else bad "truncated checkpoint: exit $rc: $(cat "$tmp/tr.err")"; fi
# 5. mismatched model flags are refused
"$K" train --resume "$tmp/run" --layers 3 --steps 9 >/dev/null 2>"$tmp/mm.err" && bad "mismatch accepted" || { grep -q -- "--layers 3: the run in .* has 2" "$tmp/mm.err" && ok || bad "mismatch message: $(cat "$tmp/mm.err")"; }
# 6. tied embeddings and recompute train; the json keeps the contract
"$K" train $G --stages 2 --steps 3 --tie-embeddings --recompute --run-dir "$tmp/tied" >"$tmp/tied.json" 2>/dev/null && ok || bad "tied + recompute run"
py "import json; d=json.loads(open('$tmp/tied.json').read().splitlines()[-1]); assert len(d['losses'])==3 and 'bubble_ratio' in d and 'predicted_bubble_ratio' in d" && ok || bad "json contract"
# 7. sampling: same seed, same text; different seed, different text
"$K" sample --run-dir "$tmp/tied" --prompt "The " --tokens 40 --seed 3 >"$tmp/s1" 2>&1 && ok || bad "sample: $(cat "$tmp/s1")"
"$K" sample --run-dir "$tmp/tied" --prompt "The " --tokens 40 --seed 3 >"$tmp/s2" 2>&1
"$K" sample --run-dir "$tmp/tied" --prompt "The " --tokens 40 --seed 4 >"$tmp/s3" 2>&1
cmp -s "$tmp/s1" "$tmp/s2" && ok || bad "sampling is not deterministic"
cmp -s "$tmp/s1" "$tmp/s3" && bad "different seeds gave the same text" || ok
"$K" sample --run-dir "$tmp/nonexistent" >/dev/null 2>"$tmp/e" && bad "sample without a run" || ok
# 8. data: a text file works, an empty one is refused
printf 'hello kaiten, the conveyor belt turns. %.0s' $(seq 1 200) >"$tmp/text.txt"
"$K" train $G --stages 2 --steps 2 --data "$tmp/text.txt" >/dev/null 2>&1 && ok || bad "--data FILE"
: >"$tmp/empty.txt"
"$K" train $G --stages 2 --steps 2 --data "$tmp/empty.txt" >/dev/null 2>"$tmp/e" && bad "empty data accepted" || { [ "$(wc -l <"$tmp/e")" -le 1 ] && ok || bad "empty data message: $(cat "$tmp/e")"; }

# 5. documents of varying length: a resumed run keeps its documents, packing
#    and chunks (bitwise continuation); bad flags are exit 2 naming the value
for extra in "--packing balanced" "--seq-chunks 2"; do
  D="$G --doc-lengths lognormal:1:4:40 $extra"
  "$K" train $D --stages 2 --steps 4 >"$tmp/dfull.json" 2>/dev/null || bad "docs $extra: full run"
  rm -rf "$tmp/drun"
  "$K" train $D --stages 2 --steps 2 --decay-steps 4 --run-dir "$tmp/drun" >/dev/null 2>&1 || bad "docs $extra: first half"
  "$K" train --resume "$tmp/drun" --stages 2 -b 2 --val-every 0 --format json --steps 4 >"$tmp/dres.json" 2>"$tmp/dres.err" || bad "docs $extra resume: $(tail -1 "$tmp/dres.err")"
  py "import json
a=json.loads(open('$tmp/dfull.json').read().splitlines()[-1])['losses'][2:]
b=json.loads(open('$tmp/dres.json').read().splitlines()[-1])['losses']
assert a==b and len(a)==2, (a, b)" && ok || bad "docs $extra: resumed losses differ"
done
# 6. balanced's token model: a share given (--attn-share) is the whole run's
#    (deterministic: two runs equal bit for bit); one calibrated on the
#    second step (config.json attn_share from attn_share_from) is kept by a
#    resumed run, whose steps equal the uninterrupted run's bit for bit
D="$G --doc-lengths lognormal:1:4:40 --packing balanced"
for i in 1 2; do "$K" train $D --stages 2 --steps 6 --attn-share 0.4 >"$tmp/pin$i.json" 2>/dev/null || bad "--attn-share run $i"; done
py "import json
a, b = (json.loads(open('$tmp/pin%d.json' % i).read().splitlines()[-1]) for i in (1, 2))
assert a['losses'] == b['losses'] and len(a['losses']) == 6, (a['losses'], b['losses'])
assert a['attn_share'] == 0.4 and a['attn_share_from'] == 0, (a['attn_share'], a['attn_share_from'])" && ok || bad "--attn-share: runs differ or the share is not the one given"
C="--layers 2 --hidden 32 --heads 2 --seq-len 256 -b 1 -m 8 --val-every 0 --format json --doc-lengths lognormal:1:16:256 --packing balanced"
rm -rf "$tmp/crun"
"$K" train $C --stages 2 --steps 8 --checkpoint-every 5 --run-dir "$tmp/crun" >"$tmp/cfull.json" 2>/dev/null || bad "calibrated run"
rm -f "$tmp/crun/checkpoints/step_00000008.ckpt"
echo step_00000005.ckpt >"$tmp/crun/checkpoints/latest"
"$K" train --resume "$tmp/crun" --stages 2 --format json --val-every 0 --steps 8 >"$tmp/cres.json" 2>"$tmp/cres.err" || bad "calibrated resume: $(tail -1 "$tmp/cres.err")"
py "import json
a = json.loads(open('$tmp/cfull.json').read().splitlines()[-1])
b = json.loads(open('$tmp/cres.json').read().splitlines()[-1])
c = json.load(open('$tmp/crun/config.json'))
assert a['losses'][5:] == b['losses'] and len(b['losses']) == 3, (a['losses'], b['losses'])
assert (b['attn_share'], b['attn_share_from']) == (a['attn_share'], a['attn_share_from']), (a['attn_share'], b['attn_share'])
if a['attn_share_from']:  # calibrated (the fit refuses noisy times)
    assert a['attn_share_from'] == 4 and (c['attn_share'], c['attn_share_from']) == (a['attn_share'], 4), c
else: print('test_gpt_cli: the times of the calibrated run did not fit the token model')" && ok || bad "calibrated share: the resumed run differs"
for args in "--doc-lengths lognormal:1:9:3" "--doc-lengths normal:1:2:9" "--doc-lengths lognormal:1:2:9 --packing lpt" \
            "--packing balanced" "--seq-chunks 2" "--doc-lengths lognormal:1:2:9 --seq-chunks 99" \
            "--doc-lengths lognormal:1:2:9 --seq-chunks 2 --recompute" "--doc-lengths lognormal:1:2:9 --seq-chunks 2 --schedule zb-h1" \
            "--doc-lengths lognormal:1:2:9 --attn-share 1.5" "--doc-lengths lognormal:1:2:9 --mb-tokens 64"; do
  "$K" train $G --stages 2 --steps 1 $args >/dev/null 2>"$tmp/e"; rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$tmp/e")" = 1 ] && ok || bad "$args: exit $rc: $(cat "$tmp/e")"
done

# 7. the predicted peak activation memory of every rank within 10% of the
#    measured, with packed documents, and in chunks along the sequence
#    (each chunk's own bytes, its first keeping the keys and values of the
#    whole micro-batch: not the full micro-batch the stages were measured on)
for chunks in "" "--seq-chunks 4"; do
  "$K" train --layers 2 --hidden 32 --heads 2 --seq-len 256 -b 1 -m 8 --stages 2 --steps 2 \
    --val-every 0 --no-live --format json --doc-lengths lognormal:1:16:256 $chunks >"$tmp/mem.json" 2>/dev/null ||
    bad "peak memory run $chunks"
  py "import json
d = json.loads(open('$tmp/mem.json').read().splitlines()[-1])
for r in d['ranks']:
    ratio = r['predicted_peak_memory'] / r['peak_memory']
    assert abs(ratio - 1) <= 0.10, (r['rank'], r['predicted_peak_memory'], r['peak_memory'])" &&
    ok || bad "predicted peak memory $chunks: $(head -c 300 "$tmp/mem.json")"
done

echo "test_gpt_cli.sh: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
