#!/usr/bin/env bash
# What groups cost a process: sockets, threads and resident memory of rank 0
# of 8 before and after a 2x2x2 DeviceMesh with all its subgroups
# (bench/mesh_footprint.cpp), with the groups sharing the default group's
# connections (the default) and with each group connecting anew
# (TDIST_SHARE_CONNECTIONS=0).
#
#   bench/footprint.sh [BUILD_DIR]     (default: build; it must hold lib/libtdist.so and bin/tdistrun)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
bin=$(mktemp /tmp/tdist-mesh-footprint.XXXXXX)
trap 'rm -f "$bin"' EXIT
g++ -std=c++20 -O2 "$repo/bench/mesh_footprint.cpp" -I"$repo/include" -I"$repo/tests" -L"$build/lib" -ltdist \
  -Wl,-rpath,"$build/lib" -o "$bin"
for share in 1 0; do
  echo "TDIST_SHARE_CONNECTIONS=$share:"
  TDIST_SHARE_CONNECTIONS=$share timeout 300 "$build/bin/tdistrun" --no-python --no-prefix --nproc-per-node 8 "$bin" | grep '^rank 0'
done
