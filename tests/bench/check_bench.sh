#!/usr/bin/env bash
# Runs tdist-bench --check under tdistrun and fails unless every measured cell
# has #wrong = 0, every collective produced rows, and the exit status is 0.
# usage: check_bench.sh BINDIR
set -u
bindir=${1:?usage: check_bench.sh BINDIR}
run=$bindir/tdistrun
bench=$bindir/tdist-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

colls="all_reduce broadcast reduce all_gather reduce_scatter all_to_all sendrecv"

for np in 2 3; do
  for root in 0 $((np - 1)); do
    out=$tmp/np$np-root$root.csv
    # Odd sizes: counts that do not split evenly, and 0-element rows for 3 ranks.
    "$run" --nproc-per-node "$np" --standalone --no-prefix --no-python "$bench" -t all -d all -o all \
      -b 12 -e 200K -f 7 -w 1 -n 2 -r "$root" -c --csv >"$out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: $np ranks, root $root: exit status $rc"; cat "$tmp/err"; fail=1; continue
    fi
    for c in $colls; do
      if ! grep -q "^tdist,$c," "$out"; then echo "FAIL: $np ranks: no rows for $c"; fail=1; fi
    done
    # Columns 11-14: out-of-place time,algbw,busbw,wrong; 15-18 in-place. A measured
    # cell (time present) must have wrong = 0.
    bad=$(awk -F, 'NR > 1 { if (($11 != "" && $14 != "0") || ($15 != "" && $18 != "0")) print }' "$out")
    if [ -n "$bad" ]; then echo "FAIL: $np ranks, root $root: wrong results:"; echo "$bad" | head -20; fail=1; fi
    rows=$(($(wc -l <"$out") - 1))
    echo "ok: $np ranks, root $root: $rows rows, #wrong 0"
  done
  # The table form: its summary line and the exit status.
  "$run" --nproc-per-node "$np" --standalone --no-prefix --no-python "$bench" -t all -b 8 -e 4K -f 8 -w 1 -n 2 -c \
    >"$tmp/table" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "^# Wrong elements *: 0 OK" "$tmp/table"; then
    echo "FAIL: $np ranks table run (exit $rc):"; cat "$tmp/table"; fail=1
  else
    echo "ok: $np ranks table run"
  fi
  # --copy-limit: the copy rows come last, checked like the collectives.
  "$run" --nproc-per-node "$np" --standalone --no-prefix --no-python "$bench" -t all_reduce -b 8 -e 64K -f 32 -n 2 -c --csv \
    --copy-limit >"$tmp/copy" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] || [ "$(tail -1 "$tmp/copy" | cut -d, -f2)" != copy ] ||
     awk -F, 'NR > 1 && $11 != "" && $14 != "0"' "$tmp/copy" | grep -q .; then
    echo "FAIL: $np ranks --copy-limit run (exit $rc):"; cat "$tmp/copy"; fail=1
  else
    echo "ok: $np ranks --copy-limit run"
  fi
  # JSON ends with the totals.
  "$run" --nproc-per-node "$np" --standalone --no-prefix --no-python "$bench" -t all_reduce -b 8 -e 64 -n 2 -c --json \
    >"$tmp/json" 2>&1
  if ! tail -1 "$tmp/json" | grep -q '"wrong":0}$'; then
    echo "FAIL: $np ranks JSON run:"; cat "$tmp/json"; fail=1
  else
    echo "ok: $np ranks JSON run"
  fi
done
exit $fail
