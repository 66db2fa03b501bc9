#!/usr/bin/env bash
# The live view fits the terminal: under tmux at 80x24 and 60x10, mid-run,
# the screen holds exactly one status line, no line longer than the width
# (joined wrapped lines would be), and at most one line per rank or group
# of ranks; a resize redraws it cleanly. Under mpirun the plain step lines
# are printed instead of escape codes (unless --live).
set -u
K=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || { echo "test_live_view: SKIP: tmux is not installed"; exit 77; }
# Every session gets a tmux server of its own: a new session on the socket
# of a server whose last session was just killed can meet that server as it
# exits ("server exited unexpectedly": the session never started).
n_sock=0
next_sock() { n_sock=$((n_sock + 1)); sock="kt$$-$n_sock"; }
cleanup() {
  for i in $(seq "$n_sock"); do tmux -L "kt$$-$i" kill-server 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
args=(--layers 2 --hidden 32 --heads 2 --seq-len 32 -m 8 -b 2 --val-every 0 --steps 100000)

# screen_ok W H P: the visible screen of the session as the view must leave it
screen_ok() {
  tmux -L "$sock" capture-pane -p -J -t live >"$tmp/screen" || return 1
  python3 - "$tmp/screen" "$1" "$2" "$3" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
w, h, p = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
status = [l for l in lines if re.match(r"step \d+/\d+", l)]
assert len(status) == 1, ("status lines", status)
assert all(len(l) <= w for l in lines), ("a wrapped line", [l for l in lines if len(l) > w])
ranks = [l for l in lines if re.match(r"\s+ranks? ", l)]
assert 1 <= len(ranks) <= min(p, h - 3), ("rank lines", len(ranks))
assert sum(1 for l in lines if l.lstrip().startswith("loss ")) <= 1
PY
}

run_live() { # W H P
  next_sock
  tmux -L "$sock" new-session -d -s live -x "$1" -y "$2" \
    "TERM=xterm-256color $K train ${args[*]} --stages $3 --run-dir $tmp/run$1x$2; sleep 30"
  for _ in $(seq 100); do
    [ -f "$tmp/run$1x$2/metrics.jsonl" ] && [ "$(wc -l <"$tmp/run$1x$2/metrics.jsonl")" -ge 20 ] && break
    sleep 0.1
  done
  # a capture may catch the block half redrawn on a loaded machine: a few tries
  local try
  for try in 1 2 3 4 5; do sleep 0.3; screen_ok "$1" "$2" "$3" 2>/dev/null && break; done
  screen_ok "$1" "$2" "$3" && ok || bad "live view at $1x$2, P=$3: $(cat "$tmp/screen")"
}

run_live 80 24 4
tmux -L "$sock" resize-window -t live -x 60 -y 12 2>/dev/null || tmux -L "$sock" resize-pane -t live -x 60 -y 12
for try in 1 2 3 4 5; do sleep 0.5; screen_ok 60 12 4 2>/dev/null && break; done
screen_ok 60 12 4 && ok || bad "after a resize to 60x12: $(cat "$tmp/screen")"
tmux -L "$sock" kill-server
args+=(--layers 6); run_live 60 10 8
tmux -L "$sock" kill-server

# under mpirun: plain lines, no escape codes
MPIEXEC=${KT_MPIEXEC:-}
if [ -n "$MPIEXEC" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  next_sock
  tmux -L "$sock" new-session -d -s live -x 100 -y 30 \
    "TERM=xterm-256color timeout 60 $MPIEXEC -np 2 --oversubscribe $K train --model mlp --stages 2 --transport mpi --steps 5 --val-every 0 >$tmp/mpi.out 2>&1; sleep 30"
  for _ in $(seq 200); do grep -q "run directory\|throughput" "$tmp/mpi.out" 2>/dev/null && break; sleep 0.1; done
  grep -q $'\x1b\[' "$tmp/mpi.out" && bad "escape codes under mpirun" || ok
  has "^step 5/5  loss" "$tmp/mpi.out"
fi
# the plain lines fit in 100 columns
expect 0 "$K" train --layers 2 --hidden 32 --heads 2 --seq-len 32 -m 8 -b 2 --val-every 2 --steps 4 --stages 2
awk 'length($0) > 100 {bad = 1; print "too long: " $0 > "/dev/stderr"} END {exit bad}' "$tmp/out" && ok ||
  bad "a line of the plain output is over 100 columns"
finish test_live_view
