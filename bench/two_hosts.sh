#!/bin/bash
# Runs tdist-bench on two emulated hosts: network namespaces tdist-h0 and
# tdist-h1 joined by a veth pair (10.77.0.1 and .2), one rank in each (or
# --per-host N), so that the ranks of different hosts talk TCP over a link as
# on two machines, and the ranks of one host share memory.
#
#   bench/two_hosts.sh [--per-host N] [--rate RATE] [--flow-cap RATE] [--build-dir DIR] [ENV=VALUE ...] -- tdist-bench args
#
# --rate RATE shapes each host's link, both ways (tc tbf, e.g. 2gbit): the
# link of a small cluster (issue 17 measures at 2 Gbit/s).
#
# --flow-cap RATE caps every TCP connection at RATE (tc htb, e.g. 500mbit),
# the way some clouds cap a single flow, leaving the link itself uncapped:
# the case TDIST_SOCKETS_PER_PEER is for. Connections are told apart by six
# bits of their ephemeral port (64 classes; Linux picks even ports for
# outgoing connections), so a few connections rarely share a cap. Needs root
# and iproute2; the namespaces are removed at the end.
#   e.g. bench/two_hosts.sh --flow-cap 500mbit TDIST_SOCKETS_PER_PEER=2 -- -t broadcast -b 1M -e 16M
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-compare cap="" rate="" per_host=1 envs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --flow-cap) cap=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *=*) envs+=("$1"); shift ;;
    *) echo "two_hosts.sh: unknown option $1 (see the header of this script)" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
bin=$build/bin
[ -x "$bin/tdist-bench" ] || { echo "two_hosts.sh: no $bin/tdist-bench (build it, or --build-dir)" >&2; exit 2; }

cleanup() { ip netns del tdist-h0 2>/dev/null || true; ip netns del tdist-h1 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add tdist-h0
ip netns add tdist-h1
ip link add tdist-v0 type veth peer name tdist-v1
for i in 0 1; do
  ip link set tdist-v$i netns tdist-h$i
  ip -n tdist-h$i addr add 10.77.0.$((i + 1))/24 dev tdist-v$i
  ip -n tdist-h$i link set tdist-v$i up
  ip -n tdist-h$i link set lo up
done
if [ -n "$rate" ]; then
  for i in 0 1; do
    ip netns exec tdist-h$i tc qdisc add dev tdist-v$i root tbf rate "$rate" burst 256kb latency 5ms
  done
fi
if [ -n "$cap" ]; then
  # Leaving h0 the peer's ephemeral port is the destination, leaving h1 the source.
  for side in "0 dport" "1 sport"; do
    read -r i field <<<"$side"
    ns=tdist-h$i dev=tdist-v$i
    ip netns exec $ns tc qdisc add dev $dev root handle 1: htb default 16 r2q 1000
    for c in $(seq 0 63); do
      ip netns exec $ns tc class add dev $dev parent 1: classid 1:$((c + 16)) htb rate "$cap" ceil "$cap"
      ip netns exec $ns tc filter add dev $dev parent 1: protocol ip prio 1 u32 match ip $field $((c * 2)) 0x007e \
        flowid 1:$((c + 16))
    done
  done
fi
# Below the kernel's ephemeral ports (32768 up): a port that an earlier connection
# of this host still holds as its local end cannot be listened on.
port=$((20000 + RANDOM % 12000))
run() {
  ip netns exec tdist-h$1 env TDIST_SOCKET_IFNAME=tdist-v$1 ${envs[@]+"${envs[@]}"} "$bin/tdistrun" --no-python --nnodes 2 \
    --node-rank "$1" --nproc-per-node "$per_host" --master-addr 10.77.0.1 --master-port $port --no-prefix "$bin/tdist-bench" "${@:2}"
}
run 1 "$@" >/dev/null &
run 0 "$@"
wait
