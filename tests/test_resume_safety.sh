#!/usr/bin/env bash
# Resume never trains the wrong thing and never loses the right thing
# (issue 35, section 3), each case as a careless user or an attacker would
# make it:
#   - a checkpoint of another model (GPT hidden 64, an MLP) in a GPT
#     hidden-32 run: exit 2 naming both shapes, nothing in the run rewritten
#     (config.json, metrics.jsonl, checkpoints);
#   - checkpoints/latest naming a file outside the run directory (relative,
#     absolute, or a symbolic link), or a checkpoint entry that links out:
#     never followed, the run's own newest checkpoint resumed, with one warning;
#   - a FIFO, a directory, a FIFO as "latest": passed over without ever
#     blocking (every command runs under a timeout), or exit 2 when nothing
#     else is left;
#   - the newest checkpoint corrupt or truncated: `--resume` and `sample` fall
#     back to the newest intact one with one warning naming the skipped file,
#     and the metrics stay those of the step resumed from (the resumed run's
#     losses equal an uninterrupted run's, bit for bit, each step once);
#   - --keep-checkpoints N keeps the newest N (default 3, 0 = all) and leaves
#     what is not a checkpoint file alone.
set -u
K=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
cd "$tmp" || exit 1
# warm-up and decay fixed, so that runs of different lengths share their lr
m=(--layers 2 --heads 2 --seq-len 32 -m 4 -b 2 --val-every 0 --no-live --stages 2 --warmup 0 --decay-steps 8)
T() { timeout 60 "$K" "$@"; } # a hang fails (exit 124) instead of stalling the suite
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
steps_of() { grep -o '"step":[0-9]*' "$1/metrics.jsonl" | cut -d: -f2 | paste -sd' '; }
sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum); }
warnings() { grep -c 'warning' "$tmp/err"; }
# a copy of the 6-step run under test (checkpoints at steps 2, 4, 6)
fresh() { rm -rf "$1" && cp -a base "$1"; }
# the resumed run's metrics: steps 1..8 once each, the losses of the uninterrupted run
same_as_ref() {
  [ "$(steps_of "$1")" = "1 2 3 4 5 6 7 8" ] && ok || bad "$1: metrics steps $(steps_of "$1")"
  losses "$1" >"$1.losses"
  cmp -s ref.losses "$1.losses" && ok || bad "$1: losses differ from the uninterrupted run: $(diff ref.losses "$1.losses" | head -4)"
}

expect 0 T train "${m[@]}" --hidden 32 --steps 8 --run-dir ref
losses ref >ref.losses
expect 0 T train "${m[@]}" --hidden 32 --steps 6 --checkpoint-every 2 --run-dir base
[ "$(ls base/checkpoints | paste -sd' ')" = "latest step_00000002.ckpt step_00000004.ckpt step_00000006.ckpt" ] &&
  ok || bad "base checkpoints: $(ls base/checkpoints)"

# --- a checkpoint of another model: refused, naming both shapes, nothing rewritten -------------
expect 0 T train "${m[@]}" --hidden 64 --steps 8 --run-dir wide
expect 0 T train --model mlp --layers 4 --hidden 32 --stages 2 -m 4 --val-every 0 --no-live --steps 8 --run-dir mlp
for other in wide:"gpt L=2 C=64 H=2 T=32 V=256" mlp:"mlp L=4 C=32"; do
  fresh A
  cp "${other%%:*}/checkpoints/step_00000008.ckpt" A/checkpoints/
  echo step_00000008.ckpt >A/checkpoints/latest
  sums A >A.sums
  [ "${other%%:*}" = wide ] && expect 0 T sample --run-dir A --tokens 4 # a checkpoint for what it holds
  expect 2 T train --resume A --steps 10
  oneline
  has "the run in 'A' trains gpt L=2 C=32 H=2 T=32 V=256 (config.json), but its checkpoint step_00000008.ckpt holds ${other#*:}: not this run's model" "$tmp/err"
  # shape flags that agree with the foreign checkpoint do not let it in either
  expect 2 T train --resume A --steps 10 --hidden 64
  oneline
  sums A | cmp -s - A.sums && ok || bad "${other%%:*}: the refused resume changed the run: $(sums A | diff - A.sums)"
done

# --- checkpoints/latest pointing outside the run: never followed ------------------------------------
expect 0 T train "${m[@]}" --hidden 32 --steps 8 --checkpoint-every 2 --run-dir other # same shape
fresh B
echo ../../other/checkpoints/step_00000008.ckpt >B/checkpoints/latest
expect 0 T train --resume B --steps 8
has "warning: checkpoints/latest names '../../other/checkpoints/step_00000008.ckpt', not a checkpoint of this run directory: not followed; resuming from B/checkpoints/step_00000006.ckpt at step 6" "$tmp/err"
[ "$(warnings)" = 1 ] && ok || bad "latest outside: not one warning: $(cat "$tmp/err")"
has "resuming B/checkpoints/step_00000006.ckpt at step 6" "$tmp/out"
same_as_ref B
fresh B2
echo "$tmp/other/checkpoints/step_00000008.ckpt" >B2/checkpoints/latest
expect 0 T sample --run-dir B2 --tokens 4
has "not followed; sampling from B2/checkpoints/step_00000006.ckpt (step 6)" "$tmp/err"
fresh B3 # latest itself a link out of the directory
rm B3/checkpoints/latest && ln -s "$tmp/other/checkpoints/latest" B3/checkpoints/latest
sums other >other.sums
expect 0 T train --resume B3 --steps 8
has "warning: checkpoints/latest is a symbolic link: not followed" "$tmp/err"
same_as_ref B3
# saving replaced the link itself: the other run's files were not written through it
[ -f B3/checkpoints/latest ] && [ ! -L B3/checkpoints/latest ] && ok || bad "latest is still a link"
sums other | cmp -s - other.sums && ok || bad "the resume wrote into the other run: $(sums other | diff - other.sums)"
fresh B4 # a newer checkpoint entry that links out of the directory
ln -s "$tmp/other/checkpoints/step_00000008.ckpt" B4/checkpoints/step_00000008.ckpt
echo step_00000008.ckpt >B4/checkpoints/latest
expect 0 T train --resume B4 --steps 8
has "warning: checkpoints/step_00000008.ckpt is a symbolic link; resuming from B4/checkpoints/step_00000006.ckpt" "$tmp/err"
same_as_ref B4

# --- a FIFO or a directory as a checkpoint: passed over, never waited on -------------------------
fresh C
mkfifo C/checkpoints/step_00000008.ckpt
echo step_00000008.ckpt >C/checkpoints/latest
expect 0 T sample --run-dir C --tokens 4
has "checkpoints/step_00000008.ckpt is a FIFO; sampling from C/checkpoints/step_00000006.ckpt (step 6)" "$tmp/err"
expect 0 T train --resume C --steps 8
has "warning: checkpoints/step_00000008.ckpt is a FIFO; resuming from C/checkpoints/step_00000006.ckpt" "$tmp/err"
same_as_ref C
# the run's own checkpoint took the FIFO's name: replaced, not written through
[ -f C/checkpoints/step_00000008.ckpt ] && ok || bad "step 8 is not a regular file after the run"
expect 0 T sample --run-dir C --tokens 4
[ ! -s "$tmp/err" ] && ok || bad "sample after the run: $(cat "$tmp/err")"
fresh C2 # "latest" a FIFO
rm C2/checkpoints/latest && mkfifo C2/checkpoints/latest
expect 0 T train --resume C2 --steps 8
has "warning: checkpoints/latest is a FIFO: not followed" "$tmp/err"
same_as_ref C2
fresh C3 # nothing else left: exit 2 with the reasons, at once
rm C3/checkpoints/step_*.ckpt
mkfifo C3/checkpoints/step_00000006.ckpt && mkdir C3/checkpoints/step_00000004.ckpt
sums C3 >C3.sums
expect 2 T train --resume C3 --steps 8
oneline
has "no intact checkpoint in 'C3/checkpoints': checkpoints/step_00000006.ckpt is a FIFO (and 1 more passed over)" "$tmp/err"
expect 2 T sample --run-dir C3
oneline
sums C3 | cmp -s - C3.sums && ok || bad "the refused resume changed the run"

# --- the newest checkpoint corrupt or truncated: the newest intact one, one warning ---------------
flip() { python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^1]))" "$@"; }
ck6=checkpoints/step_00000006.ckpt
size=$(stat -c %s base/$ck6)
for damage in "flip 200000:unit 1 is corrupt (checksum mismatch)" \
              "flip 20:corrupt checkpoint header" \
              "half:truncated checkpoint (no end marker)" \
              "head:truncated checkpoint (100 bytes)" \
              "tail:1 bytes after its last unit"; do
  how=${damage%%:*} why=${damage#*:}
  fresh D
  case $how in
    flip*) flip D/$ck6 "${how#flip }" ;;
    half) truncate -s $((size / 2)) D/$ck6 ;;
    head) truncate -s 100 D/$ck6 ;;
    tail) python3 -c "import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:-10]+b'x'+b[-10:])" D/$ck6 ;;
  esac
  expect 0 T train --resume D --steps 8
  has "warning: checkpoints/step_00000006.ckpt: $why" "$tmp/err"
  has "resuming from D/checkpoints/step_00000004.ckpt at step 4; steps 5-6 run again" "$tmp/err"
  [ "$(warnings)" = 1 ] && ok || bad "$how: not one warning: $(cat "$tmp/err")"
  same_as_ref D
done
# the reason named for a flipped unit and a header cut short
fresh D
flip D/$ck6 200000
expect 0 T sample --run-dir D --tokens 4
has "warning: checkpoints/step_00000006.ckpt: unit 1 is corrupt (checksum mismatch); sampling from D/checkpoints/step_00000004.ckpt (step 4)" "$tmp/err"
[ "$(warnings)" = 1 ] && ok || bad "sample: not one warning: $(cat "$tmp/err")"
fresh D
truncate -s 100 D/$ck6
expect 0 T sample --run-dir D --tokens 4
has "checkpoints/step_00000006.ckpt: truncated checkpoint (100 bytes)" "$tmp/err"
# a file renamed to a later step is not that step
fresh D
cp D/checkpoints/step_00000004.ckpt D/checkpoints/step_00000008.ckpt
expect 0 T train --resume D --steps 8
has "warning: checkpoints/step_00000008.ckpt holds step 4" "$tmp/err"
same_as_ref D
# every checkpoint damaged: exit 2 naming the newest, the run left as it was
fresh E
for f in E/checkpoints/step_*.ckpt; do truncate -s 1000 "$f"; done
sums E >E.sums
expect 2 T train --resume E --steps 8
oneline
has "no intact checkpoint in 'E/checkpoints': checkpoints/step_00000006.ckpt: truncated checkpoint (no end marker) (and 2 more passed over)" "$tmp/err"
sums E | cmp -s - E.sums && ok || bad "the refused resume changed the run"

# --- --keep-checkpoints ------------------------------------------------------------------------------
ckpts() { ls "$1/checkpoints" | grep '^step_' | sed 's/step_0*\([0-9]*\).ckpt/\1/' | sort -n | paste -sd' '; }
expect 0 T train "${m[@]}" --hidden 32 --steps 10 --checkpoint-every 1 --run-dir k3
[ "$(ckpts k3)" = "8 9 10" ] && ok || bad "default keeps $(ckpts k3), not the newest 3"
has step_00000010.ckpt k3/checkpoints/latest
expect 0 T train "${m[@]}" --hidden 32 --steps 10 --checkpoint-every 1 --keep-checkpoints 5 --run-dir k5
[ "$(ckpts k5)" = "6 7 8 9 10" ] && ok || bad "--keep-checkpoints 5 kept $(ckpts k5)"
expect 0 T train "${m[@]}" --hidden 32 --steps 10 --checkpoint-every 1 --keep-checkpoints 0 --run-dir k0
[ "$(ckpts k0)" = "1 2 3 4 5 6 7 8 9 10" ] && ok || bad "--keep-checkpoints 0 kept $(ckpts k0)"
# resuming prunes too; what is not a checkpoint file stays
mkfifo k3/checkpoints/step_00000001.ckpt && echo notes >k3/checkpoints/notes.txt
expect 0 T train --resume k3 --steps 13 --checkpoint-every 1 --keep-checkpoints 2
[ "$(ckpts k3)" = "1 12 13" ] && [ -f k3/checkpoints/notes.txt ] && ok || bad "resume with --keep-checkpoints 2 left $(ckpts k3)"
[ -p k3/checkpoints/step_00000001.ckpt ] && ok || bad "pruning removed a FIFO"
expect 2 T train "${m[@]}" --keep-checkpoints -1 --run-dir kneg
oneline
expect 0 T train --help
has "keep-checkpoints N" "$tmp/out"
has "default 3; 0 = all" "$tmp/out"

finish test_resume_safety
