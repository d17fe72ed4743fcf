#!/usr/bin/env bash
# Runs the tutorial examples as a user would (through tdistrun, and spawning
# themselves) and checks that each rank prints what the tutorial says.
set -uo pipefail
bin="$1"
failures=0
passes=0

expect() {  # expect NAME OUTPUT LINE...
  local name="$1" out="$2"; shift 2
  for line in "$@"; do
    if ! grep -qxF -- "$line" <<<"$out"; then
      echo "FAIL $name: missing line: $line"; echo "--- output:"; echo "$out"; echo "---"
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok   $name"
  passes=$((passes + 1))
}

for n in 1 2 4 5; do
  out=$(timeout 120 "$bin/tdistrun" --nproc-per-node "$n" "$bin/tdist-example-all_reduce" 2>&1)
  lines=(); for ((r = 0; r < n; r++)); do lines+=("[rank$r]: Rank $r has data $n (expected $n)"); done
  expect "all_reduce on $n ranks via tdistrun" "$out" "${lines[@]}"
done

out=$(timeout 120 "$bin/tdistrun" --nproc-per-node 2 "$bin/tdist-example-p2p_blocking" 2>&1)
expect "p2p_blocking via tdistrun" "$out" "[rank0]: Rank 0 has data 1" "[rank1]: Rank 1 has data 1"

out=$(timeout 120 "$bin/tdist-example-p2p_nonblocking" 2>&1)
expect "p2p_nonblocking spawning itself" "$out" "Rank 0 started sending" "Rank 1 started receiving" \
  "Rank 0 has data 1" "Rank 1 has data 1"

out=$(timeout 120 "$bin/tdist-example-setup_template" 3 2>&1)
expect "setup_template spawning 3" "$out" "Hello from rank 0 of 3 (backend tdist)" \
  "Hello from rank 1 of 3 (backend tdist)" "Hello from rank 2 of 3 (backend tdist)"

out=$(timeout 120 "$bin/tdistrun" --standalone --nproc-per-node 3 "$bin/tdist-example-p2p_blocking" 2>&1)
expect "p2p_blocking on 3 ranks (rank 2 keeps 0)" "$out" "[rank2]: Rank 2 has data 0" "[rank1]: Rank 1 has data 1"

echo "examples: $passes passed, $failures failed"
exit $((failures > 0))
