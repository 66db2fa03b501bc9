# Renders the rows collected by bench/run.sh (command, then the fields of
# bench/bench_rows.h, tab-separated) as a markdown table. Run over the rows
# file twice: the first pass learns each row's median, for "@ID" ratios.
BEGIN { FS = "\t" }

function num(x, a) {
  if (x == "-" || x == "") return "—"
  a = x < 0 ? -x : x
  if (a >= 1000) return sprintf("%.0f", x)
  if (a >= 100) return sprintf("%.1f", x)
  if (a >= 1) return sprintf("%.2f", x)
  return sprintf("%.3g", x)
}

function cell(s) { gsub(/\|/, "\\|", s); return s }

NR == FNR { med[$2] = $5; unit[$2] = $4; next }

FNR == 1 {
  print "| command | measured | median | min–max | reference | ratio |"
  print "|---|---|---|---|---|---|"
}

{
  cmd = $1 == last ? "" : "`" $1 "`"
  last = $1
  ref = $8; ratio = $9
  if (ratio ~ /^@/) {
    id = substr(ratio, 2)
    if (id in med && med[id] > 0) {
      ref = ref " (" num(med[id]) " " unit[id] ")"
      ratio = $5 / med[id]
    } else {
      ratio = "-"
    }
  }
  range = $6 == "-" ? "—" : num($6) "–" num($7)
  printf "| %s | %s | %s %s | %s | %s | %s |\n", cell(cmd), cell($3), num($5), $4, range,
    ref == "-" ? "—" : cell(ref), ratio == "-" ? "—" : sprintf("%#.3g", ratio)
}
