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
  out=$(timeout 120 "$bin/tdistrun" --nproc-per-node "$n" --no-python "$bin/tdist-example-all_reduce" 2>&1)
  lines=(); for ((r = 0; r < n; r++)); do lines+=("[rank$r]: Rank $r has data $n (expected $n)"); done
  expect "all_reduce on $n ranks via tdistrun" "$out" "${lines[@]}"
done

out=$(timeout 120 "$bin/tdistrun" --nproc-per-node 2 --no-python "$bin/tdist-example-p2p_blocking" 2>&1)
expect "p2p_blocking via tdistrun" "$out" "[rank0]: Rank 0 has data 1" "[rank1]: Rank 1 has data 1"

out=$(timeout 120 "$bin/tdist-example-p2p_nonblocking" 2>&1)
expect "p2p_nonblocking spawning itself" "$out" "Rank 0 started sending" "Rank 1 started receiving" \
  "Rank 0 has data 1" "Rank 1 has data 1"

out=$(timeout 120 "$bin/tdist-example-setup_template" 3 2>&1)
expect "setup_template spawning 3" "$out" "Hello from rank 0 of 3 (backend tdist)" \
  "Hello from rank 1 of 3 (backend tdist)" "Hello from rank 2 of 3 (backend tdist)"

out=$(timeout 120 "$bin/tdistrun" --standalone --nproc-per-node 3 --no-python "$bin/tdist-example-p2p_blocking" 2>&1)
expect "p2p_blocking on 3 ranks (rank 2 keeps 0)" "$out" "[rank2]: Rank 2 has data 0" "[rank1]: Rank 1 has data 1"

# 我们自己的Ring-Allreduce: rank r contributes [r, r+1, ..., r+9]; every rank ends with the sums
# and says whether they match tdist::all_reduce (also checked on a large tensor).
ring_lines() {  # ring_lines N PREFIX: the lines every rank of N must print
  local n=$1 prefix=$2 r j data
  for ((r = 0; r < n; r++)); do
    data=""
    for ((j = 0; j < 10; j++)); do data+="${data:+, }$((n * (n - 1) / 2 + n * j))"; done
    lines+=("${prefix//R/$r}Rank $r has data [$data]" "${prefix//R/$r}Rank $r ring all_reduce matches tdist::all_reduce: yes")
  done
}
out=$(timeout 120 "$bin/tdist-example-ring_all_reduce" 1 2>&1)
lines=(); ring_lines 1 ""
expect "ring_all_reduce spawning 1" "$out" "${lines[@]}"
out=$(timeout 120 "$bin/tdist-example-ring_all_reduce" 3 2>&1)
lines=(); ring_lines 3 ""
expect "ring_all_reduce spawning 3" "$out" "${lines[@]}"
out=$(timeout 120 "$bin/tdistrun" --nproc-per-node 4 --no-python "$bin/tdist-example-ring_all_reduce" 2>&1)
lines=(); ring_lines 4 "[rankR]: "
expect "ring_all_reduce on 4 ranks via tdistrun" "$out" "${lines[@]}"

# 分布式同步SGD on the digits data set (python3-sklearn): every rank prints 10 epochs whose loss
# goes down, then that all ranks hold the same weights and a held-out accuracy of at least 0.85.
check_sgd() {  # check_sgd NAME N OUTPUT
  local name=$1 n=$2 out=$3 r first last acc why=""
  for ((r = 0; r < n; r++)); do
    [[ -z $why ]] || break
    local mine
    mine=$(sed -E 's/^\[rank[0-9]+\]: //' <<<"$out" | grep -E "^Rank $r(,|:) ")
    if (($(grep -cE "^Rank $r, epoch [0-9]+: loss [0-9.]+$" <<<"$mine") != 10)); then
      why="rank $r did not print 10 epochs"
    elif ! grep -qxF "Rank $r: weights identical on all ranks: yes" <<<"$mine"; then
      why="rank $r: missing line: Rank $r: weights identical on all ranks: yes"
    else
      first=$(sed -nE "s/^Rank $r, epoch 0: loss ([0-9.]+)$/\1/p" <<<"$mine")
      last=$(sed -nE "s/^Rank $r, epoch 9: loss ([0-9.]+)$/\1/p" <<<"$mine")
      acc=$(sed -nE "s/^Rank $r: held-out accuracy ([0-9.]+)( .*)?$/\1/p" <<<"$mine")
      if [[ -z $acc ]]; then
        why="rank $r printed no held-out accuracy"
      elif ! awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
        why="rank $r: the loss did not decrease (epoch 0: $first, epoch 9: $last)"
      elif ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }'; then
        why="rank $r: held-out accuracy $acc < 0.85"
      fi
    fi
  done
  if [[ -n $why ]]; then
    echo "FAIL $name: $why"; echo "--- output:"; echo "$out"; echo "---"
    failures=$((failures + 1))
  else
    echo "ok   $name"
    passes=$((passes + 1))
  fi
}
out=$(timeout 120 "$bin/tdist-example-sgd_digits" 2 2>&1)
check_sgd "sgd_digits spawning 2" 2 "$out"
out=$(timeout 120 "$bin/tdistrun" --nproc-per-node 4 --no-python "$bin/tdist-example-sgd_digits" 2>&1)
check_sgd "sgd_digits on 4 ranks via tdistrun" 4 "$out"

echo "examples: $passes passed, $failures failed"
exit $((failures > 0))
