#!/usr/bin/env bash
# tdist-bench --device cuda --check under tdistrun: 2 and 4 ranks sharing the
# machine's first GPU (tdist allows several ranks per GPU), every collective on
# device buffers, a few sizes and types; asserts #wrong is 0 everywhere, and the
# copy rows (--copy-limit) are there. Exits 77 (ctest: skipped) where there is no
# GPU or no CUDA in this build, saying which.
# usage: check_bench_cuda.sh BINDIR
set -u
bindir=${1:?usage: check_bench_cuda.sh BINDIR}
run=$bindir/tdistrun
bench=$bindir/tdist-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bench" --device cuda -t all_reduce -b 8 -e 8 -w 0 -n 1 >"$tmp/probe" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  if grep -q "no CUDA device\|built without CUDA" "$tmp/probe"; then
    echo "SKIP: $(grep -m1 "no CUDA device\|built without CUDA" "$tmp/probe")"
    exit 77
  fi
  echo "FAIL: one rank, --device cuda (exit $rc):"; cat "$tmp/probe"; exit 1
fi

fail=0
for np in 2 4; do
  out=$tmp/np$np.csv
  "$run" --nproc-per-node "$np" --standalone --no-prefix --no-python "$bench" --device cuda --copy-limit \
    -t all_reduce,broadcast,reduce,all_gather,reduce_scatter,all_to_all,sendrecv -d float,bfloat16,int32 \
    -o sum,max -b 12 -e 1M -f 37 -w 1 -n 2 -c --csv >"$out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $np ranks: exit status $rc"; cat "$tmp/err"; tail -5 "$out"; fail=1; continue
  fi
  for c in all_reduce broadcast reduce all_gather reduce_scatter all_to_all sendrecv copy; do
    if ! grep -q "^tdist.*,$c," "$out"; then echo "FAIL: $np ranks: no rows for $c"; fail=1; fi
  done
  bad=$(awk -F, 'NR > 1 { if (($11 != "" && $14 != "0") || ($15 != "" && $18 != "0")) print }' "$out")
  if [ -n "$bad" ]; then echo "FAIL: $np ranks: wrong results:"; echo "$bad" | head -20; fail=1; fi
  echo "ok: $np ranks on one GPU: $(($(wc -l <"$out") - 1)) rows"
done
exit $fail
