# shellcheck shell=bash disable=SC2034
# Sourced by the benchmark scripts: options and result rows (the format of
# bench/bench_rows.h). Options: [--quick] [--tsv FILE] [BUILD_DIR].
QUICK=0 TSV='' B=build
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --tsv) TSV=$2; shift ;;
    -*) echo "usage: $0 [--quick] [--tsv FILE] [BUILD_DIR]" >&2; exit 2 ;;
    *) B=$1 ;;
  esac
  shift
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Numbers on stdin -> "median min max" (the median of an even count is the
# mean of the two middle values, as kt_median).
stats() {
  sort -g | awk '{v[NR] = $1} END {
    if (!NR) exit 1
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}

# Per-step seconds (times 1000) from a run directory's metrics.jsonl, after
# the first two steps (warm-up).
step_ms() {
  sed -n 's/.*[{,]"seconds":\([-+0-9.eE]*\).*/\1/p' "$1/metrics.jsonl" | tail -n +3 |
    awk '{printf "%.6g\n", 1e3 * $1}'
}

# quiet LOG CMD...: runs CMD with its output in LOG, shown only if it fails.
quiet() {
  local log=$1; shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "$0: failed: $*" >&2; return 1; }
}

# row ID MEASURED UNIT MEDIAN MIN MAX REFERENCE REF_VALUE: appends a row to
# $TSV (if set; "-": stdout); the ratio is MEDIAN / REF_VALUE ("-" for none).
row() {
  [ -n "$TSV" ] || return 0
  local ratio=-
  [ "$8" = - ] || ratio=$(awk -v a="$4" -v b="$8" 'BEGIN {printf "%.6g", a / b}')
  local line
  line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$ratio")
  if [ "$TSV" = - ]; then echo "$line"; else echo "$line" >>"$TSV"; fi
}
