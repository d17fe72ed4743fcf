#!/usr/bin/env bash
# What the flight recorder (on by default) costs the smallest collective:
#   bench/recorder_overhead.sh [BUILD_DIR] [ROUNDS]
# 1. In one pair of processes (bench/recorder_overhead.cpp): one group with its
#    recorder and with it paused, alternating batches of 20000 all_reduces of
#    8 B; the median of the pairs' ratios.
# 2. As the issue asks: tdist-bench runs with TDIST_FLIGHT_RECORDER_ENTRIES=0
#    and with the default, alternating, ROUNDS of each; the median of each and
#    of the adjacent pairs' ratios. Separate processes differ from run to run
#    by more than the effect (docs/tracing.md): read this one with that in mind.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
rounds=${2:-100}
probe=$(mktemp /tmp/tdist-recorder-overhead.XXXXXX)
trap 'rm -f "$probe"' EXIT
g++ -std=c++20 -O2 "$repo/bench/recorder_overhead.cpp" -I"$repo/include" -I"$repo/src" -L"$build/lib" -ltdist \
  -Wl,-rpath,"$build/lib" -o "$probe"
echo "== in one pair of processes"
"$build/bin/tdistrun" --no-python --no-prefix --nproc-per-node 2 "$probe" "$rounds" 20000 8 | tail -1
echo "== tdist-bench, alternating runs"
results=$(mktemp)
for i in $(seq 1 "$rounds"); do
  for n in 0 default; do
    if [ "$n" = 0 ]; then env_set=(TDIST_FLIGHT_RECORDER_ENTRIES=0); else env_set=(); fi
    t=$(env "${env_set[@]}" "$build/bin/tdistrun" --no-python --no-prefix --nproc-per-node 2 "$build/bin/tdist-bench" \
      --sizes 8 -n 40000 -w 4000 --place in --csv 2>/dev/null | tail -1 | cut -d, -f15)
    echo "$n $t" >>"$results"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
off = [float(v) for k, v in rows if k == "0"]
on = [float(v) for k, v in rows if k != "0"]
ratios = [b / a for a, b in zip(off, on)]
print("tdist-bench all_reduce 8 B, 2 ranks, %d runs each: median off %.4f us, on %.4f us (%+.2f%%); "
      "median of pair ratios %.4f" % (len(off), st.median(off), st.median(on),
                                      (st.median(on) / st.median(off) - 1) * 100, st.median(ratios)))
PY
rm -f "$results"
