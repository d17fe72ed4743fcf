#!/bin/bash
# An emulated cluster on this machine: H hosts, each a network namespace with
# its own hostname (a UTS namespace per command run in it), joined by a switch
# (a bridge in a namespace of its own), each host's link shaped with tc. Used
# by the cluster tests (tests/cluster) and benchmarks (bench/cluster.sh).
# Needs root, iproute2 and util-linux' unshare; touches nothing outside its
# own namespaces, so several clusters can exist at once (by NAME).
#
#   scripts/cluster.sh check [loss]           exit 0 if clusters (that can drop packets) can be made
#                                             here, else say why and exit 77
#   scripts/cluster.sh up NAME HOSTS [--links K] [--ipv6] [--rate RATE] [--delay TIME] [--loss PERCENT]
#   scripts/cluster.sh exec NAME H CMD...     run CMD on host H (0-based) as hostname NAME-hH
#   scripts/cluster.sh addr NAME H [L]        host H's address on its link L (default 0)
#   scripts/cluster.sh addr6 NAME H [L]       its IPv6 address (a cluster made with --ipv6)
#   scripts/cluster.sh link NAME H up|down    set host H's links up or down (cables pulled)
#   scripts/cluster.sh loss NAME PERCENT      drop PERCENT% of the packets every host receives
#   scripts/cluster.sh dropped NAME           how many packets the loss has dropped so far
#   scripts/cluster.sh down NAME              remove every namespace of NAME
#
# Host h is 10.99.L.(h+1)/24 on its link ethL; --links K gives every host K
# links (default 1), each on a switch of its own, as hosts with several
# network interfaces have; --ipv6 adds fd99:L::(h+1)/64 on each. --rate shapes each link both ways (tc
# tbf; e.g. 2gbit). --delay and --loss need the kernel's netem; where it has
# none, --delay fails with a message and --loss (and `loss`) drop packets
# with iptables' statistic match instead (Debian's iptables package).
# NAME: letters and digits, at most 8 (namespace and link names stay short).
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 2; }
host_ns() { echo "tdc-$1-h$2"; }
switch_ns() { echo "tdc-$1-sw"; }
addr_of() { echo "10.99.${3:-0}.$(($2 + 1))"; }
addr6_of() { echo "fd99:${3:-0}::$(($2 + 1))"; }
links_of() { ip netns exec "$(host_ns "$1" "$2")" ls /sys/class/net | grep -c '^eth' || true; }
check_name() { [[ $1 =~ ^[A-Za-z0-9]{1,8}$ ]] || die "NAME must be 1-8 letters or digits, not '$1'"; }
hosts_of() { ip netns list | awk '{print $1}' | grep -c "^tdc-$1-h[0-9]*$" || true; }
has_netem() {
  local ns=tdc-netem$$ ok=1
  ip netns add "$ns" && ip -n "$ns" link set lo up && ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms \
    >/dev/null 2>&1 && ok=0
  ip netns del "$ns" 2>/dev/null || true
  return $ok
}

# Why clusters cannot be made here ("" if they can).
why_not() {
  [ "$(id -u)" = 0 ] || { echo "not root (network namespaces need root)"; return; }
  command -v ip >/dev/null || { echo "no ip command (install iproute2)"; return; }
  command -v tc >/dev/null || { echo "no tc command (install iproute2)"; return; }
  command -v unshare >/dev/null || { echo "no unshare command (install util-linux)"; return; }
  local ns=tdc-probe$$
  if ! ip netns add "$ns" 2>/dev/null; then echo "ip netns add failed (no network namespaces here)"; return; fi
  local why=""
  if ! ip netns exec "$ns" unshare --uts true 2>/dev/null; then
    why="unshare --uts failed (no UTS namespaces here)"
  elif ! ip -n "$ns" link add tdc-a type veth peer name tdc-b 2>/dev/null; then
    why="ip link add ... type veth failed (no veth in this kernel)"
  elif ! ip -n "$ns" link add tdc-br type bridge 2>/dev/null; then
    why="ip link add ... type bridge failed (no bridges in this kernel)"
  elif ! ip netns exec "$ns" tc qdisc add dev tdc-a root tbf rate 1gbit burst 256kb latency 5ms 2>/dev/null; then
    why="tc qdisc add ... tbf failed (no tbf in this kernel)"
  elif [ "${1:-}" = loss ] && ! has_netem &&
    ! { command -v iptables >/dev/null &&
        ip netns exec "$ns" iptables -A INPUT -m statistic --mode random --probability 0.01 -j DROP 2>/dev/null; }; then
    why="neither netem nor iptables' statistic match can drop packets here"
  fi
  ip netns del "$ns"
  echo "$why"
}

# drop_in NAME H PERCENT: host H drops PERCENT% of what it receives (0: none).
drop_in() {
  local ns; ns=$(host_ns "$1" "$2")
  if has_netem; then
    for ((l = 0; l < $(links_of "$1" "$2"); l++)); do
      ip netns exec "$ns" tc qdisc change dev "eth$l" root handle 1: netem loss "$3%" 2>/dev/null ||
        die "changing host $2's netem qdisc failed (was the cluster made with --loss?)"
    done
    return
  fi
  command -v iptables >/dev/null || die "no netem in this kernel and no iptables (apt-get install iptables)"
  ip netns exec "$ns" iptables -F INPUT
  if [ "$3" != 0 ]; then
    local p; p=$(awk -v pc="$3" 'BEGIN { printf "%.6f", pc / 100 }')
    ip netns exec "$ns" iptables -A INPUT -m statistic --mode random --probability "$p" -j DROP
  fi
}

cmd=${1:-}; shift || true
case "$cmd" in
  check)
    why=$(why_not "${1:-}")
    [ -z "$why" ] || { echo "cluster.sh: cannot make an emulated cluster here: $why"; exit 77; }
    ;;
  up)
    [ $# -ge 2 ] || die "usage: up NAME HOSTS [--rate RATE] [--delay TIME] [--loss PERCENT]"
    name=$1 hosts=$2; shift 2
    check_name "$name"
    [[ $hosts =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || die "HOSTS must be 1..200, not '$hosts'"
    rate="" delay="" loss="" links=1 ipv6=0
    while [ $# -gt 0 ]; do
      case "$1" in
        --ipv6) ipv6=1; shift ;;
        --links) links=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --delay) delay=$2; shift 2 ;;
        --loss) loss=$2; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    why=$(why_not)
    [ -z "$why" ] || die "cannot make an emulated cluster here: $why"
    [ "$(hosts_of "$name")" = 0 ] || die "a cluster named $name exists (scripts/cluster.sh down $name)"
    netem=0
    if [ -n "$delay$loss" ] && has_netem; then netem=1; fi
    [ -z "$delay" ] || [ $netem = 1 ] || die "--delay needs the kernel's netem, which this kernel lacks"
    sw=$(switch_ns "$name")
    trap '"$0" down "$name" >/dev/null 2>&1' ERR
    [[ $links =~ ^[1-8]$ ]] || die "--links must be 1..8, not '$links'"
    ip netns add "$sw"
    for ((l = 0; l < links; l++)); do
      ip -n "$sw" link add "br$l" type bridge
      ip -n "$sw" link set "br$l" up
    done
    for ((h = 0; h < hosts; h++)); do
      ns=$(host_ns "$name" "$h")
      ip netns add "$ns"
      ip -n "$ns" link set lo up
      for ((l = 0; l < links; l++)); do
        ip link add "eth$l" netns "$ns" type veth peer name "h${h}l$l" netns "$sw"
        ip -n "$sw" link set "h${h}l$l" master "br$l" up
        ip -n "$ns" addr add "$(addr_of "$name" "$h" "$l")/24" dev "eth$l"
        # nodad: usable at once, not after duplicate address detection.
        [ $ipv6 = 0 ] || ip -n "$ns" -6 addr add "$(addr6_of "$name" "$h" "$l")/64" dev "eth$l" nodad
        ip -n "$ns" link set "eth$l" up
        # The link's shape, on both ends: what the host sends and what it receives.
        for end in "$ns eth$l" "$sw h${h}l$l"; do
          read -r n dev <<<"$end"
          parent=root
          if [ $netem = 1 ]; then
            ip netns exec "$n" tc qdisc add dev "$dev" root handle 1: netem ${delay:+delay $delay} \
              ${loss:+loss $loss%} limit 100000
            parent="parent 1:"
          fi
          if [ -n "$rate" ]; then
            ip netns exec "$n" tc qdisc add dev "$dev" $parent handle 2: tbf rate "$rate" burst 256kb latency 5ms
          fi
        done
      done
      if [ -n "$loss" ] && [ $netem = 0 ]; then drop_in "$name" "$h" "$loss"; fi
    done
    trap - ERR
    ;;
  exec)
    [ $# -ge 3 ] || die "usage: exec NAME H CMD..."
    name=$1 h=$2; shift 2
    ns=$(host_ns "$name" "$h")
    ip netns list | awk '{print $1}' | grep -qx "$ns" || die "no host $h in cluster $name"
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name-h$h" "$@"
    ;;
  addr)
    [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: addr NAME H [L]"
    addr_of "$1" "$2" "${3:-0}"
    ;;
  addr6)
    [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: addr6 NAME H [L]"
    addr6_of "$1" "$2" "${3:-0}"
    ;;
  link)
    [ $# -eq 3 ] || die "usage: link NAME H up|down"
    [[ $3 == up || $3 == down ]] || die "link: up or down, not '$3'"
    for ((l = 0; l < $(links_of "$1" "$2"); l++)); do ip -n "$(switch_ns "$1")" link set "h$2l$l" "$3"; done
    ;;
  loss)
    [ $# -eq 2 ] || die "usage: loss NAME PERCENT"
    n=$(hosts_of "$1")
    [ "$n" -gt 0 ] || die "no cluster named $1"
    for ((h = 0; h < n; h++)); do drop_in "$1" "$h" "$2"; done
    ;;
  dropped)
    [ $# -eq 1 ] || die "usage: dropped NAME"
    n=$(hosts_of "$1") total=0
    for ((h = 0; h < n; h++)); do
      ns=$(host_ns "$1" "$h")
      if command -v iptables >/dev/null && ip netns exec "$ns" iptables -L INPUT -n >/dev/null 2>&1; then
        d=$(ip netns exec "$ns" iptables -L INPUT -v -n -x | awk '$3 == "DROP" { s += $1 } END { print s + 0 }')
        total=$((total + d))
      fi
      d=$(ip netns exec "$ns" tc -s qdisc show | grep -o 'dropped [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
      total=$((total + d))
    done
    echo "$total"
    ;;
  down)
    [ $# -eq 1 ] || die "usage: down NAME"
    check_name "$1"
    for ns in $(ip netns list | awk '{print $1}' | grep "^tdc-$1-"); do ip netns del "$ns" 2>/dev/null || true; done
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
    ;;
esac
