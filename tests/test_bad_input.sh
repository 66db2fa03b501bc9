#!/usr/bin/env bash
# The bad-input table: every wrong invocation or file exits 2 with one line
# on stderr that names the bad value; nothing crashes, hangs or leaves output.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
cd "$tmp" || exit 1
printf '' >empty.file
head -c 4096 /dev/urandom >binary.file
printf '\x00\x01\x02kaiten\x00' >nul.file
printf '0F0,0F1,0B0,0B1\n1F0,1B0,1F' >truncated.csv
printf '0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n' >deadlock.csv
printf '0F0,0F1,0I0,0W0\n' >noweights.csv
printf '0F0,0B0\n1F0,1B0\n' >good.csv
printf '{"tf": [1, 2' >truncated.json
printf '{"tf": -1}' >negative.json
printf '{"tf": 1, "tbb": 2}' >unknownkey.json
printf '{"layers": 4, "hidden": "wide"}' >badmodel.json
printf 'hello\n' >tiny.txt
mkdir -p adir
"$K" train --model mlp --stages 2 -m 2 --steps 1 --run-dir mlp_run --no-live >/dev/null 2>&1

n=0
# case NEEDLE ARGS...: exit 2, one stderr line containing NEEDLE, no crash or hang
case_() {
  local needle=$1; shift
  n=$((n + 1))
  timeout -k 10 60 "$K" "$@" >out.txt 2>err.txt; local rc=$?
  if [ $rc != 2 ]; then bad "#$n exit $rc (want 2): kaiten $* :: $(head -c 300 err.txt)"; return; fi
  ok
  if [ "$(wc -l <err.txt)" = 1 ]; then ok; else bad "#$n stderr not one line: kaiten $* :: $(cat err.txt)"; fi
  if grep -qF -- "$needle" err.txt; then ok; else bad "#$n '$needle' not named: kaiten $* :: $(cat err.txt)"; fi
}

# sizes: zero, negative, huge, not a number
case_ "'0'"        sim -p 0
case_ "'-3'"       sim -p -3
case_ "'99999999'" sim -p 99999999
case_ "'0'"        sim -m 0
case_ "'-1'"       sim -m -1
case_ "'1e9'"      sim -m 1e9
case_ "'four'"     sim -p four
case_ "'65'"       sim --schedule interleaved -v 65
case_ "'1000'"     sim --schedule interleaved -v 1000
case_ "'0'"        compare -p 0
case_ "'0'"        train --stages 0
case_ "'0'"        train --microbatches 0
case_ "'-1'"       train --steps -1
case_ "'0'"        train -b 0
# schedules, formats and what a schedule cannot take
case_ "'bogus'"    sim --schedule bogus
case_ "'bogus'"    compare --schedules 1f1b,bogus
case_ "'xml'"      sim --format xml
case_ "'yaml'"     compare --format yaml
case_ "M=2"        sim --schedule interleaved -p 4 -m 2
case_ "V=3"        sim --schedule zbv -p 4 -m 8 -v 3
case_ "'nope'"     train --schedule nope
# costs: NaN, negative, infinite, wrong count, malformed lists
case_ "nan"        sim --tf nan
case_ "-1"         sim --tf -1
case_ "inf"        sim --tb inf
case_ "'-0.5'"     sim --comm -0.5
case_ "3 stages"   sim -p 4 --tf 1,2,3
case_ "1,,2"       sim --tf 1,,2
case_ "'2'"        sim --overlap 2
# files: missing, empty, binary, truncated, a directory, wrong content
case_ "missing.json"   sim --costs missing.json
case_ "empty.file"     sim --costs empty.file
case_ "binary.file"    sim --costs binary.file
case_ "truncated.json" sim --costs truncated.json
case_ "tf"             sim --costs negative.json
case_ "missing.csv"    validate missing.csv
case_ "empty.file"     validate empty.file
case_ "binary.file"    validate binary.file
case_ "nul.file"       validate nul.file
case_ "1F"             validate truncated.csv
case_ "adir"           validate adir
case_ "deadlock"       validate deadlock.csv
case_ "0B1"            validate noweights.csv
case_ "'bogus'"        validate deadlock.csv --torch-notation bogus
case_ "missing.csv"    sim --schedule-file missing.csv
case_ "-p disagrees"   sim --schedule-file good.csv -p 3
case_ "binary.file"    train --schedule-file binary.file
case_ "--stages"       train --schedule-file good.csv --stages 3
# training configuration
case_ "'3,3'"          train --model mlp --stages 2 --partition 3,3
case_ "'0,8'"          train --model mlp --stages 2 --partition 0,8
case_ "'transformer'"  train --model transformer
case_ "'lion'"         train --optimizer lion
case_ "'-1'"           train --lr -1
case_ "'carrier'"      train --transport carrier
case_ "missing.txt"    train --data missing.txt
case_ "empty.file"     train --data empty.file
case_ "mlp"            train --model gpt --resume mlp_run --steps 2
case_ "--hidden 32"    train --model mlp --hidden 32 --resume mlp_run --steps 2
case_ "nodir"          train --resume nodir
# planner and reports
case_ "'nosuch'"       plan --model nosuch
case_ "missing.json"   plan --cluster missing.json
case_ "binary.file"    plan --model binary.file
case_ "hidden"         plan --model badmodel.json
case_ "nodir"          report nodir
case_ "nodir"          sample --run-dir nodir
# flags that disagree or mean nothing, which were once silently resolved
case_ "'0'"            train --steps 0
case_ "--comm 1"       sim --comm 1 --comm-bandwidth 1000 --comm-bytes 500
case_ "--comm-bytes 500" sim --comm-bytes 500
case_ "--comm-latency 2" sim --comm-latency 2
case_ "twice"          compare --schedules 1f1b,1f1b
case_ "twice"          compare --schedules interleaved,interleaved-1f1b
case_ "all 0"          sim --tf 0 --tb 0 --tw 0
case_ "all 0"          compare --tf 0,0,0,0 --tb 0 --tw 0
case_ "GiB"            sim -p 4096 -m 1000000
case_ "GiB"            compare -p 4096 -m 1000000
case_ "tbb"            sim --costs unknownkey.json
case_ "malformed"      sim --costs truncated.json
# run directories: an old run, a live writer, the layout of a resume
case_ "not empty"      train --model mlp --stages 2 -m 2 --steps 1 --run-dir mlp_run
case_ "--force"        train --model mlp --force --steps 1
case_ "does not exist" train --model mlp --resume nosuch_run --steps 3
# the command line itself
case_ "'frobnicate'"   frobnicate
case_ "--frobnicate"   sim --frobnicate
case_ "-p"             sim -p
case_ "'extra'"        sim extra
# per-micro-batch costs and documents packed into micro-batches
printf '{"tf": [[1, 2], [3]]}' >ragged.json
case_ '"tf"[1]'                 sim -p 2 -m 2 --costs ragged.json
case_ "M=3"                     sim -p 2 -m 3 --tf '1,2;3,4'
case_ "stage 1 lists 1"         sim -p 2 -m 2 --tf '1,2;3'
case_ "'lognormal:1:16'"        sim --doc-lengths lognormal:1:16
case_ "'lpt'"                   sim --doc-lengths lognormal:1:16:1024 --packing lpt
case_ "mb-tokens=64"            sim --doc-lengths lognormal:1:16:1024 --mb-tokens 64
case_ "'1.5'"                   sim --doc-lengths lognormal:1:16:1024 --attn-share 1.5
case_ "micro-batch 1 keeps more for its W" sim -s optimal -p 2 -m 2 --tf '1,2;1,2' --mem-wgrad '0.5,2;0.5,2'
case_ "need --doc-lengths"      train --synthetic --packing balanced --steps 1 --no-live
case_ "'lognormal:9'"           train --synthetic --doc-lengths lognormal:9 --steps 1 --no-live
# faults: a delay the watchdog would take for a lost peer (a run once slept
# it for ever), an onset past the run, a trace read without bound or whose
# lines name other links than its first (their delays were misattributed)
printf '0.1;0_1,0_1;0.01,0.02\n' >dup.trace
printf '0.1;0_1;0.01\n0.2;1_2;0.02\n' >relinked.trace
printf '0.1;0_1;0.01\0\n' >nul.trace
printf '0.1;0_1;100\n' >late.trace
printf '0.1;0_1;0.01\n' >ok.trace
syn=(train --synthetic -p 4 -m 4 --steps 2 --no-live --tf 0.1 --tb 0.1 --tw 0.1)
case_ "'0-1:+1e308'"        "${syn[@]}" --slow-link 0-1:+1e308
case_ "--timeout 60"        "${syn[@]}" --slow-link 0-1:+60s
case_ "'late.trace'"        "${syn[@]}" --fault-trace late.trace
case_ "'1:2@3'"             "${syn[@]}" --slow-rank 1:2@3
case_ "'0-1:+1@3'"          "${syn[@]}" --slow-link 0-1:+1@3
case_ "'ok.trace@3'"        "${syn[@]}" --fault-trace ok.trace@3
case_ "'0_1' is named twice" "${syn[@]}" --fault-trace dup.trace
case_ "relinked.trace:2"    "${syn[@]}" --fault-trace relinked.trace
case_ "NUL byte"            "${syn[@]}" --fault-trace nul.trace
case_ "--slow-rank is given 2 times" "${syn[@]}" --slow-rank 1:2 --slow-rank 0:2
case_ "'3': step 3 is past" "${syn[@]}" --inject-nan 3
case_ "--gemm has no meaning with --synthetic" "${syn[@]}" --gemm blis
case_ "--threads-per-rank has no meaning"      "${syn[@]}" --threads-per-rank 4
# synthetic cost lists: one entry per stage that runs (a shorter list was read
# past its end, a longer one cut), no per-micro-batch form (it was averaged)
case_ "list 2 stages; the pipeline has 4" "${syn[@]}" --tf 1,2
case_ "list 3 stages; the pipeline has 2" train --synthetic -p 2 -m 2 --steps 1 --no-live --tf 1,2,3
case_ "'1,2;3,4'"           train --synthetic -p 2 -m 2 --steps 1 --no-live --tf '1,2;3,4'
# a slow link no message crosses (1f1b's ranks 3 and 0) changed nothing, silently
printf '0.1;0_1,3_0;0.01,0.01\n' >wrap.trace
case_ "slow link 0-3: no message of 1f1b" sim -p 4 -m 8 --slow-link 3-0:+5
case_ "slow link 0-3: no message of zbv"  sim -s zbv -p 4 -m 8 --slow-link 0-3:+5
case_ "slow link 0-3"       "${syn[@]}" --slow-link 3-0:+1
case_ "slow link 0-3"       "${syn[@]}" --fault-trace wrap.trace
# compare: a fault off the pipeline, or input no row can take, is the
# input's error (it once printed an empty table and exit 0)
case_ "slow-rank 4"         compare -p 4 -m 8 --slow-rank 4:2
case_ "slow-link 1-3"       compare -p 4 -m 8 --slow-link 1-3:+1
case_ "1e+308"              compare -p 4 -m 8 --slow-link 0-1:+1e308
case_ "3 stages"            compare -p 4 -m 8 --tf 1,2,3
case_ "2 links"             compare -p 4 -m 8 --comm 1,2
case_ "M=8"                 compare -p 4 -m 8 --tf '1,2;3,4;5,6;7,8'
case_ "mb-tokens=15"        compare --doc-lengths lognormal:1:16:1024 --mb-tokens 15
case_ "M >= P"              compare -p 4 -m 2 --schedules interleaved
# per-link latency and bandwidth: a list counts as given (a latency list
# alone was ignored, a bandwidth list with --comm-bytes refused)
case_ "--comm-latency 3 needs --comm-bandwidth" sim -p 4 --comm-latency 1,2,3
case_ "both set the time of a hop" sim -p 4 --comm 1 --comm-bandwidth 1,2,3
case_ "link 1 has 0"        sim -p 4 --comm-bandwidth 1,0,3 --comm-bytes 1
# packing flags without documents to pack were ignored by sim and compare
case_ "--packing balanced"  sim --packing balanced
case_ "--mb-tokens 64"      sim --mb-tokens 64
case_ "--attn-share 0.5"    compare --attn-share 0.5
case_ "--seed 3"            compare --seed 3

# nothing partial is written when the input is bad
timeout 60 "$K" sim -p 0 -o never.txt >/dev/null 2>&1
timeout 60 "$K" sim --schedule interleaved -p 4 -m 2 --report never.html >/dev/null 2>&1
if ls never.* .never* 2>/dev/null | grep -q .; then bad "output written for bad input"; else ok; fi
[ "$n" -ge 80 ] && ok || bad "only $n cases"

# a run directory on a full disk while metrics are written: one clear line,
# exit 1, the lines written so far whole
mnt="$tmp/full"
mkdir -p "$mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=48k tmpfs "$mnt" 2>/dev/null; then
  timeout 120 "$K" train --synthetic --stages 2 -m 2 --tf 0.1 --tb 0.1 --tw 0.1 --steps 100000 \
    --no-live --run-dir "$mnt/run" >full.out 2>full.err; rc=$?
  [ $rc = 1 ] && ok || bad "full disk: exit $rc: $(tail -2 full.err)"
  grep -q "No space left on device" full.err && [ "$(grep -c '^kaiten: ' full.err)" = 1 ] && ok ||
    bad "full disk: not one clear line: $(cat full.err)"
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)' "$mnt/run/metrics.jsonl" && ok || bad "full disk: a torn metrics line was left"
  umount "$mnt"
else
  echo "test_bad_input: the full-disk case is skipped (mounting a tmpfs needs root)"
fi
echo "test_bad_input: $n cases"
finish test_bad_input
