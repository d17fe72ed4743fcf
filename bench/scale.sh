#!/usr/bin/env bash
# What a job costs to start as it grows: init plus the first 8-byte
# all_reduce on N ranks, and each rank's sockets, threads and resident memory
# after it (bench/scale_probe.cpp; min / median / max over the ranks). Three
# placements per N: one host (the shared-memory engine), one host with
# TDIST_SHM=0 (the transport engine's algorithms over TCP), and emulated hosts
# (scripts/cluster.sh: network namespaces, so the hierarchical engine runs;
# needs root).
#
#   bench/scale.sh [--build-dir DIR] [--ranks "16 64 128 256"] [--hosts H]
#
# DIR holds lib/libtdist.so and bin/tdistrun (default: build). --hosts: how
# many emulated hosts (default 16; 0 skips them); N must be a multiple.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build ranks="16 64 128 256" hosts=16
while (($#)); do
  case $1 in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    *) echo "scale.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
probe=$(mktemp /tmp/tdist-scale-probe.XXXXXX)
name=scale$$
name=${name:0:8}
cleanup() {
  rm -f "$probe"
  [ "$hosts" -gt 0 ] && "$repo/scripts/cluster.sh" down "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
g++ -std=c++20 -O2 "$repo/bench/scale_probe.cpp" -I"$repo/include" -I"$repo/tests" -L"$build/lib" -ltdist \
  -Wl,-rpath,"$build/lib" -o "$probe"
ulimit -n 65536 2>/dev/null || true
now_ms() { date +%s%3N; }

for n in $ranks; do
  echo "one host, $n ranks:"
  SCALE_PROBE_START_MS=$(now_ms) timeout 600 "$build/bin/tdistrun" --no-python --no-prefix --nproc-per-node "$n" "$probe" | grep '^ranks'
  echo "one host, $n ranks, TDIST_SHM=0:"
  TDIST_SHM=0 SCALE_PROBE_START_MS=$(now_ms) timeout 600 "$build/bin/tdistrun" --no-python --no-prefix --nproc-per-node "$n" \
    "$probe" | grep '^ranks'
done

[ "$hosts" -gt 0 ] || exit 0
if ! "$repo/scripts/cluster.sh" check >/dev/null 2>&1; then
  echo "emulated hosts skipped: $("$repo/scripts/cluster.sh" check 2>&1 | tail -1)"
  exit 0
fi
"$repo/scripts/cluster.sh" up "$name" "$hosts" >/dev/null
# One token for the job's hosts, as a multi-node launch needs (tdistrun makes one per single-node job only).
export TDIST_JOB_TOKEN=${TDIST_JOB_TOKEN:-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')}
master=$("$repo/scripts/cluster.sh" addr "$name" 0)
for n in $ranks; do
  if ((n % hosts != 0)); then echo "$n ranks do not split over $hosts hosts: skipped"; continue; fi
  echo "$hosts hosts x $((n / hosts)) ranks:"
  # Below the kernel's ephemeral ports (32768 up): a port that an earlier connection
  # of this host still holds as its local end cannot be listened on.
  port=$((20000 + RANDOM % 12000)) start=$(now_ms)
  for ((h = hosts - 1; h >= 0; h--)); do
    cmd=("$repo/scripts/cluster.sh" exec "$name" "$h" env SCALE_PROBE_START_MS="$start" TDIST_SOCKET_IFNAME=eth0
      "$build/bin/tdistrun" --no-python --nnodes "$hosts" --node-rank "$h" --nproc-per-node $((n / hosts))
      --master-addr "$master" --master-port "$port" --no-prefix "$probe")
    if ((h > 0)); then "${cmd[@]}" >/dev/null & else "${cmd[@]}" | grep '^ranks'; fi
  done
  wait
done
