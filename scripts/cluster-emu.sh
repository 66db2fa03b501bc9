#!/usr/bin/env bash
# Emulated cluster on one machine: N hosts (network namespaces, each with its
# own IP and host name) joined by a switch (a bridge in one more namespace),
# every host's link to the switch rate-limited in both directions with tc's
# token bucket (tbf) over a queue per peer. OpenMPI runs across them over
# TCP, launched into each host by an rsh agent that enters the host's
# namespace.
#
#   cluster-emu.sh up   [--hosts N] [--link 1gbit|100mbit|none] [--slots S] [--dir DIR]
#   cluster-emu.sh run  [--dir DIR | up options] -- MPIRUN_ARGS...
#   cluster-emu.sh down --dir DIR
#
# up prints the cluster directory (hostfile, rsh agent, mpirun flags, names);
# run uses an existing cluster (--dir) or brings one up for the command and
# removes it after; down removes everything up created. Needs root (CAP_NET_ADMIN)
# and iproute2; exits 77 when namespaces cannot be made.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

hosts=2 link=none slots=1 dir="" cmd="${1:-}"
[ -n "$cmd" ] || usage
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --link) link="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "cluster-emu.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
case "$hosts" in 2 | 3 | 4) ;; *) echo "cluster-emu.sh: --hosts '$hosts' must be 2, 3 or 4" >&2; exit 2 ;; esac
case "$link" in none | 1gbit | 100mbit) ;; *) echo "cluster-emu.sh: --link '$link' must be 1gbit, 100mbit or none" >&2; exit 2 ;; esac
case "$slots" in [1-9]) ;; *) echo "cluster-emu.sh: --slots '$slots' must be 1..9" >&2; exit 2 ;; esac

NET=10.77.0 # host i is $NET.i
SUBNET=$NET.0/24
# Jumbo frames, as cluster networks use: every packet of the emulated links
# is moved by this machine's cores in software (veth, bridge, token bucket),
# and at 1 Gbit/s both ways 1500-byte frames kept about 60% of two cores in
# softirq, starving the ranks the emulated hosts run (their hand-offs came
# milliseconds late) and holding each direction to 0.09 GB/s; 9000-byte
# frames take about 5% and let both directions run at the link's rate.
MTU=9000

# Removes every namespace named in DIR/names (their veths go with them) and DIR.
down() {
  local d="$1"
  [ -f "$d/names" ] || return 0
  while read -r ns; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done <"$d/names"
  rm -rf "$d"
}

# Each direction of a host's link: a rate limit (tbf, with a shallow token
# bucket: a message that follows an idle gap passes its first burst at
# once, and no more; tbf splits GSO packets larger than it) over one queue per peer (the hosts it sends to on the
# uplink, the hosts it hears from on the switch's port), served in turn a
# packet each (an htb whose classes never reach their own rate: round
# robin). One queue per link let one pair's backlog of queued messages
# hold up another pair's message for tens of milliseconds (a pipeline's
# middle host sends to two peers, and each message waited behind the
# other's); hosts queue per flow (fq, fq_codel) and switches serve their
# input ports in turn, so transfers that share a link share its rate, as
# the links model prices them.
# shape NS DEV src|dst SELF: the peers are matched by source or destination.
shape() {
  local ns="$1" dev="$2" match="$3" self="$4" j
  local tc=(ip netns exec "$ns" tc)
  case "$link" in
    none) return 0 ;;
    1gbit) "${tc[@]}" qdisc add dev "$dev" root handle 1: tbf rate 1gbit burst 64kb latency 100ms ;;
    100mbit) "${tc[@]}" qdisc add dev "$dev" root handle 1: tbf rate 100mbit burst 16kb latency 200ms ;;
  esac
  "${tc[@]}" qdisc add dev "$dev" parent 1:1 handle 10: htb default 99
  for j in 99 $(seq 1 "$hosts"); do
    [ "$j" = "$self" ] && continue
    "${tc[@]}" class add dev "$dev" parent 10: classid "10:$j" htb rate 10gbit burst 64k cburst 64k quantum 9100
    [ "$j" = 99 ] && continue # anything not from or to a peer (none expected)
    "${tc[@]}" filter add dev "$dev" parent 10: protocol ip prio 1 u32 \
      match ip "$match" "$NET.$j/32" flowid "10:$j"
  done
}

up() {
  [ "$(id -u)" = 0 ] || { echo "cluster-emu.sh: needs root to create network namespaces" >&2; exit 77; }
  command -v ip >/dev/null || { echo "cluster-emu.sh: ip (iproute2) not found; scripts/deps.sh installs it" >&2; exit 77; }
  local id
  id="kt$$$RANDOM"
  dir="${dir:-$(mktemp -d "${TMPDIR:-/tmp}/kaiten-cluster.XXXXXX")}"
  mkdir -p "$dir"
  : >"$dir/names"
  trap 'down "$dir"' EXIT INT TERM
  local sw="$id-sw"
  ip netns add "$sw" 2>/dev/null || { echo "cluster-emu.sh: cannot create network namespaces here" >&2; exit 77; }
  echo "$sw" >>"$dir/names"
  ip netns exec "$sw" ip link add br0 type bridge
  ip netns exec "$sw" ip link set br0 up
  : >"$dir/hostfile"
  : >"$dir/hosts"
  for i in $(seq 1 "$hosts"); do
    local ns="$id-h$i" ip="$NET.$i"
    ip netns add "$ns"
    echo "$ns" >>"$dir/names"
    ip link add "$id-$i" mtu "$MTU" type veth peer name "$id-s$i" mtu "$MTU"
    ip link set "$id-$i" netns "$ns"
    ip link set "$id-s$i" netns "$sw"
    ip netns exec "$ns" ip link set "$id-$i" name eth0
    ip netns exec "$ns" ip addr add "$ip/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$sw" ip link set "$id-s$i" master br0
    ip netns exec "$sw" ip link set "$id-s$i" up
    shape "$ns" eth0 dst "$i"        # host -> switch: a queue per destination
    shape "$sw" "$id-s$i" src "$i"  # switch -> host: a queue per source
    echo "$ip slots=$slots" >>"$dir/hostfile"
    echo "$ip $ns host$i" >>"$dir/hosts"
  done
  ip netns exec "$sw" ip link set br0 mtu "$MTU"
  # mpirun probes its link to every host's daemon once a second when idle,
  # so a host whose link is cut is declared lost (and the job ended) within
  # about 4 s rather than after TCP's retransmission timeout of minutes.
  # Messages up to 4 MiB are sent eagerly: a send then leaves at once instead
  # of waiting for the receiver to answer a rendezvous between its own ops.
  # The emulated hosts share this machine's cores, and each host's daemon
  # would bind its first rank to "its" core 0: with one rank per host every
  # rank then ran on the same real core. --bind-to none leaves them to the
  # kernel (on real machines, keep mpirun's default binding).
  # The agent mpirun calls as `agent HOST COMMAND...`: the command runs in the
  # host's namespace under the host's own name (a UTS namespace), as ssh would.
  cat >"$dir/rsh-agent" <<EOF
#!/bin/sh
host="\$1"; shift
line=\$(grep "^\$host " "$dir/hosts") || { echo "rsh-agent: unknown host \$host" >&2; exit 255; }
set -- "\$(echo "\$line" | cut -d' ' -f2)" "\$(echo "\$line" | cut -d' ' -f3)" "\$*"
exec ip netns exec "\$1" unshare --uts sh -c 'hostname "\$1" && exec sh -c "\$2"' sh "\$2" "\$3"
EOF
  chmod +x "$dir/rsh-agent"
  printf '%s\n' --hostfile "$dir/hostfile" --mca plm_rsh_agent "$dir/rsh-agent" \
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" \
    --mca oob_tcp_if_include "$SUBNET" --mca btl_tcp_eager_limit 4194304 \
    --mca btl_tcp_rndv_eager_limit 4194304 --mca oob_tcp_keepalive_time 1 \
    --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 --bind-to none >"$dir/mpirun-flags"
  echo "$link" >"$dir/link"
  trap - EXIT INT TERM
}

# mpirun inside host 1 (under host 1's name) with the cluster's flags.
run_in() {
  local d="$1"
  shift
  local ns1 flags=()
  ns1=$(sed -n 1p "$d/hosts" | cut -d' ' -f2)
  mapfile -t flags <"$d/mpirun-flags"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$ns1" unshare --uts sh -c 'hostname host1 && exec "$@"' sh \
    mpirun "${flags[@]}" "$@"
}

case "$cmd" in
  up)
    up
    echo "$dir"
    ;;
  down)
    [ -n "$dir" ] || { echo "cluster-emu.sh: down needs --dir DIR" >&2; exit 2; }
    down "$dir"
    ;;
  run)
    [ $# -gt 0 ] || { echo "cluster-emu.sh: run needs -- MPIRUN_ARGS" >&2; exit 2; }
    if [ -n "$dir" ] && [ -f "$dir/hostfile" ]; then
      run_in "$dir" "$@"
    else
      up
      trap 'down "$dir"' EXIT INT TERM
      rc=0
      run_in "$dir" "$@" || rc=$?
      exit "$rc"
    fi
    ;;
  *) usage ;;
esac
