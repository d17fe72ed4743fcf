#!/bin/bash
# Runs tdist-cluster-worker on an emulated cluster (scripts/cluster.sh): one
# network namespace per host, with its own hostname, on a bridge.
#
#   cluster_test.sh WORKER SCENARIO
#
# Scenarios:
#   matrix HOSTS_CSV   every collective on the world, the DeviceMesh and subgroups
#                      (HOSTS_CSV: ranks per host, e.g. 2,2 or 1,2,3)
#   loss               2x2, the matrix while every host drops 1% of the packets it receives
#   link_down          2x2: host 1's link goes down during all_reduces; every rank
#                      must fail within the timeout naming a peer on the other host
#   host_killed        2x2: host 1's ranks are killed during all_reduces; the ranks
#                      of host 0 must fail naming one of them
#   interfaces         2x2, two links per host, TDIST_SOCKET_IFNAME=eth0,eth1: the matrix
#                      passes and every host's both interfaces carry a share of the bytes
#   interfaces_differ  as interfaces, but rank 3 lists eth0 alone: every rank fails
#                      naming both lists
#   ipv6               2x2 over IPv6 only (MASTER_ADDR an IPv6 literal, no IPv4 address
#                      on the links): the matrix passes
#
# Exit 77 (ctest's skip) where namespaces cannot be made (not root).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../scripts/cluster.sh
worker=$1 scenario=$2
shift 2

why=$("$cluster" check "$([ "$scenario" = loss ] && echo loss)") || { echo "SKIPPED: $why"; exit 77; }

# Clusters of earlier runs that were killed before their cleanup (a ctest
# timeout): their test's process is gone.
for stale in $(ip netns list | awk '{print $1}' | sed -n 's/^tdc-c\([0-9]*\)-sw$/\1/p'); do
  kill -0 "$stale" 2>/dev/null || "$cluster" down "c$stale"
done
name=c$$
# Below the kernel's ephemeral ports (32768 up): a port that an earlier connection
# of this host still holds as its local end cannot be listened on.
port=$((20000 + RANDOM % 12000))
work=$(mktemp -d /tmp/tdist-cluster.XXXXXX)
cleanup() {
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
  "$cluster" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAILED: $*"; for f in "$work"/rank*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }

# Environment for every rank (job_env) and for one (rank_env[r]): VAR=VALUE words.
# The ranks of a job share a token, as the launcher would hand them.
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
job_env=()
declare -A rank_env=()

# launch HOSTS_CSV ARGS...: starts every rank (host-major: host h's ranks are
# consecutive) in the background and sets n to their number; pids in
# $work/pids/<rank>, output in $work/rank<r>.log.
launch() {
  local csv=$1; shift
  local -a counts
  IFS=, read -ra counts <<<"$csv"
  local h r l c
  n=0
  for c in "${counts[@]}"; do n=$((n + c)); done
  mkdir -p "$work/pids"
  r=0
  for ((h = 0; h < ${#counts[@]}; h++)); do
    for ((l = 0; l < counts[h]; l++)); do
      # shellcheck disable=SC2086
      "$cluster" exec "$name" "$h" env TDIST_JOB_TOKEN="$token" ${job_env[@]+"${job_env[@]}"} ${rank_env[$r]:-} \
        RANK=$r WORLD_SIZE=$n LOCAL_RANK=$l LOCAL_WORLD_SIZE="${counts[h]}" \
        MASTER_ADDR="${master:-$("$cluster" addr "$name" 0)}" MASTER_PORT=$port \
        CLUSTER_TIMEOUT_S="${CLUSTER_TIMEOUT_S:-120}" "$worker" "$@" >"$work/rank$r.log" 2>&1 &
      echo $! >"$work/pids/$r"
      echo "$h" >"$work/pids/$r.host"
      r=$((r + 1))
    done
  done
}

case "$scenario" in
  matrix | loss)
    csv=${1:-2,2} mode=matrix
    if [ "$scenario" = loss ]; then
      csv=2,2 mode=matrix
      "$cluster" up "$name" 2 --loss 1 || fail "could not make the cluster"
    else
      IFS=, read -ra counts <<<"$csv"
      "$cluster" up "$name" "${#counts[@]}" || fail "could not make the cluster"
    fi
    launch "$csv" "$mode" "$csv"
    for ((r = 0; r < n; r++)); do
      wait "$(cat "$work/pids/$r")"
      code=$?
      [ "$code" = 0 ] || fail "rank $r exited with $code"
      grep -q "rank $r ok" "$work/rank$r.log" || fail "rank $r did not report ok"
    done
    if [ "$scenario" = loss ]; then
      dropped=$("$cluster" dropped "$name")
      [ "$dropped" -gt 0 ] || fail "no packet was dropped: the loss was not in effect"
      echo "the hosts dropped $dropped packets"
    fi
    echo "PASSED: $scenario on hosts of $csv ranks: every rank ok"
    ;;
  link_down | host_killed)
    timeout_s=${CLUSTER_TIMEOUT_S:-20}
    export CLUSTER_TIMEOUT_S=$timeout_s
    "$cluster" up "$name" 2 || fail "could not make the cluster"
    mkdir -p "$work/ready"
    launch 2,2 fault "$work/ready"
    # A bound for a hung start, not a speed check: generous for a loaded machine.
    for _ in $(seq 1800); do
      [ "$(ls "$work/ready" | wc -l)" -ge "$n" ] && break
      sleep 0.1
    done
    [ "$(ls "$work/ready" | wc -l)" -ge "$n" ] || fail "the ranks did not all start within 180 s"
    start=$SECONDS
    if [ "$scenario" = link_down ]; then
      "$cluster" link "$name" 1 down
      survivors="0 1 2 3"
    else
      # Killing the ranks of host 1 (pids are of `cluster.sh exec`, which execs down to the worker).
      for r in 2 3; do kill -9 "$(cat "$work/pids/$r")"; done
      survivors="0 1"
    fi
    for r in $survivors; do
      wait "$(cat "$work/pids/$r")"
      code=$?
      [ "$code" = 3 ] || fail "rank $r exited with $code, expected the error exit (3)"
    done
    elapsed=$((SECONDS - start))
    # The failure is driven by the timeout, not by speed: the bound is the
    # timeout plus a minute of slack for a loaded machine (it fails only if
    # the ranks hang instead of timing out).
    [ "$elapsed" -le $((timeout_s + 60)) ] || fail "the survivors took ${elapsed}s to fail (timeout ${timeout_s}s)"
    for r in $survivors; do
      log=$work/rank$r.log
      grep -q "ERROR" "$log" || fail "rank $r printed no error"
      host=$(cat "$work/pids/$r.host")
      # The peer it names must be on the other host, with that host's address.
      other=$((1 - host))
      addr=$("$cluster" addr "$name" "$other")
      grep -Eq "rank [$((other * 2))$((other * 2 + 1))]\b" "$log" || fail "rank $r's error names no rank of host $other"
      grep -q "$addr" "$log" || fail "rank $r's error does not name host $other's address $addr"
    done
    echo "PASSED: $scenario: every survivor failed within ${elapsed}s naming a peer on the other host:"
    for r in $survivors; do sed -n 's/^/  /; /ERROR/p' "$work/rank$r.log" | cut -c1-400; done
    ;;
  ipv6)
    "$cluster" up "$name" 2 --ipv6 || fail "could not make the cluster"
    # Only IPv6 on the links: what reaches the other host must be IPv6.
    for h in 0 1; do ip -n "tdc-$name-h$h" -4 addr flush dev eth0; done
    master=$("$cluster" addr6 "$name" 0)
    launch 2,2 matrix 2,2
    for ((r = 0; r < n; r++)); do
      wait "$(cat "$work/pids/$r")"
      code=$?
      [ "$code" = 0 ] || fail "rank $r exited with $code"
    done
    echo "PASSED: the matrix over IPv6 (MASTER_ADDR=$master)"
    ;;
  interfaces | interfaces_differ)
    "$cluster" up "$name" 2 --links 2 || fail "could not make the cluster"
    job_env=(TDIST_SOCKET_IFNAME=eth0,eth1)
    [ "$scenario" = interfaces ] || rank_env[3]=TDIST_SOCKET_IFNAME=eth0
    launch 2,2 matrix 2,2
    for ((r = 0; r < n; r++)); do
      wait "$(cat "$work/pids/$r")"
      code=$?
      if [ "$scenario" = interfaces ]; then
        [ "$code" = 0 ] || fail "rank $r exited with $code"
      else
        [ "$code" != 0 ] || fail "rank $r succeeded although rank 3 lists fewer interfaces"
        log=$work/rank$r.log
        grep -q "eth0,eth1 (2 interfaces)" "$log" && grep -q "eth0 (1 interface)" "$log" ||
          fail "rank $r's error does not name both lists"
      fi
    done
    if [ "$scenario" = interfaces_differ ]; then
      echo "PASSED: every rank failed naming both lists:"
      sed -n 's/^/  /; /FAILED/p' "$work/rank0.log" | cut -c1-400
      exit 0
    fi
    # Each interface of each host sent at least a fifth of what the host sent.
    for h in 0 1; do
      read -r b0 b1 < <("$cluster" exec "$name" $h sh -c \
        'echo $(cat /sys/class/net/eth0/statistics/tx_bytes) $(cat /sys/class/net/eth1/statistics/tx_bytes)')
      echo "host $h sent $b0 bytes on eth0 and $b1 on eth1"
      [ $((b0 * 5)) -ge $((b0 + b1)) ] && [ $((b1 * 5)) -ge $((b0 + b1)) ] ||
        fail "host $h's traffic is not spread over its interfaces (eth0 $b0 bytes, eth1 $b1)"
    done
    echo "PASSED: the matrix over two interfaces per host"
    ;;
  *)
    echo "cluster_test.sh: unknown scenario $scenario" >&2
    exit 2
    ;;
esac
