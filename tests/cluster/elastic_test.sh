#!/bin/bash
# tdistrun's agents on an emulated cluster (scripts/cluster.sh): one agent per
# host, each in its own network namespace, found through the rendezvous
# endpoint on host 0; the workers train with elastic_worker.
#
#   elastic_test.sh TDISTRUN ELASTIC_WORKER SCENARIO
#
# Scenarios:
#   no_node_ranks  3 hosts x 2 workers started the same way, without --node-rank:
#                  one job of 6 ranks, node ranks 0, 1, 2 each given once
#   restart        2 hosts x 1 worker, --max-restarts 2; rank 1 dies in the first
#                  attempt: every host restarts and the job finishes
#   worker_killed  as restart, but rank 1 is killed (SIGKILL) mid-training
# (One worker per host there: when several workers of a host end together,
# which the launcher reaps first is not defined.)
#   shrink         3 hosts with --nnodes 2:3 and --max-restarts 1; host 2's agent is
#                  killed while training: hosts 0 and 1 finish as a job of 4 ranks
#
# Exit 77 (ctest's skip) where namespaces cannot be made (not root).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../scripts/cluster.sh
tdistrun=$1 worker=$2 scenario=$3

why=$("$cluster" check) || { echo "SKIPPED: $why"; exit 77; }

name=e$$
# Below the kernel's ephemeral ports (32768 up): a port that an earlier connection
# of this host still holds as its local end cannot be listened on.
port=$((20000 + RANDOM % 12000))
work=$(mktemp -d /tmp/tdist-elastic.XXXXXX)
cleanup() {
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
  "$cluster" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAILED: $*"; for f in "$work"/node*.log; do echo "--- $f"; tail -n 25 "$f"; done; exit 1; }

token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# agent HOST ARGS...: starts tdistrun on HOST in the background; pid in $work/node<HOST>.pid.
# The worker is a C++ program: --no-python.
agent() {
  local h=$1; shift
  "$cluster" exec "$name" "$h" env TDIST_JOB_TOKEN="$token" "$tdistrun" --no-python "$@" >"$work/node$h.log" 2>&1 &
  echo $! >"$work/node$h.pid"
}
finish() {  # finish HOST: waits for its agent; fails unless it exits 0
  wait "$(cat "$work/node$1.pid")" || fail "host $1's tdistrun exited with $?"
}
expect_done() {
  [ "$(cat "$work/out/done" 2>/dev/null)" = "$1" ] || fail "done file: '$(cat "$work/out/done" 2>/dev/null)', expected '$1'"
}

mkdir -p "$work/out"
case "$scenario" in
  no_node_ranks)
    "$cluster" up "$name" 3 || fail "could not make the cluster"
    endpoint=$("$cluster" addr "$name" 0):$port
    for h in 0 1 2; do
      agent "$h" --nnodes 3 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$endpoint" "$worker" "$work/out" 6 0
    done
    for h in 0 1 2; do finish "$h"; done
    expect_done "world=6 restarts=0 steps=6 sum=126"
    ranks=$(cat "$work"/node*.log | sed -n 's/^tdistrun: round 0: node \([0-9]\) of 3.*/\1/p' | sort | tr '\n' ' ')
    [ "$ranks" = "0 1 2 " ] || fail "node ranks given: '$ranks'"
    grep -q "hosting the rendezvous store on $endpoint" "$work/node0.log" || fail "host 0 did not host the store"
    ;;
  restart)
    "$cluster" up "$name" 2 || fail "could not make the cluster"
    endpoint=$("$cluster" addr "$name" 0):$port
    for h in 0 1; do
      agent "$h" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --max-restarts 2 "$worker" "$work/out" 10 20 1 4
    done
    for h in 0 1; do finish "$h"; done
    expect_done "world=2 restarts=1 steps=10 sum=30"
    # Rank 1 is on whichever host joined second (node ranks follow the joining order).
    cat "$work"/node*.log | grep -q "^tdistrun:     tdist::DistError: elastic_worker: rank 1 fails on purpose at step 4" ||
      fail "no summary shows rank 1's error file"
    grep -q "restarting the workers in a new round: rank " "$work/node0.log" || fail "host 0 did not restart"
    ;;
  worker_killed)
    "$cluster" up "$name" 2 || fail "could not make the cluster"
    endpoint=$("$cluster" addr "$name" 0):$port
    for h in 0 1; do
      agent "$h" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --max-restarts 2 "$worker" "$work/out" 100 40
    done
    for _ in $(seq 600); do
      [ "$(wc -l <"$work/out/progress.0" 2>/dev/null || echo 0)" -ge 6 ] && break
      sleep 0.1
    done
    [ -s "$work/out/pid.1.0" ] || fail "rank 1 did not start"
    kill -9 "$(cat "$work/out/pid.1.0")"
    for h in 0 1; do finish "$h"; done
    expect_done "world=2 restarts=1 steps=100 sum=300"
    cat "$work"/node*.log | grep -q "^tdistrun: rank 1 (local_rank 0, pid [0-9]*) failed first: killed by signal 9 (SIGKILL)" ||
      fail "no summary names rank 1's SIGKILL"
    ;;
  shrink)
    "$cluster" up "$name" 3 || fail "could not make the cluster"
    endpoint=$("$cluster" addr "$name" 0):$port
    for h in 0 1 2; do
      agent "$h" --nnodes 2:3 --nproc-per-node 2 --rdzv-endpoint "$endpoint" --max-restarts 1 \
        --rdzv-conf last_call_timeout=5 "$worker" "$work/out" 150 40
    done
    # Once the round of all three hosts trains, host 2 dies: its agent (its workers die with it).
    for _ in $(seq 900); do
      [ "$(cat "$work"/node*.log | grep -c "^tdistrun: round 0: node . of 3")" = 3 ] &&
        [ "$(wc -l <"$work/out/progress.0" 2>/dev/null || echo 0)" -ge 18 ] && break
      sleep 0.1
    done
    [ "$(cat "$work"/node*.log | grep -c "^tdistrun: round 0: node . of 3")" = 3 ] || fail "the 3 hosts did not form one round"
    [ "$(wc -l <"$work/out/progress.0" 2>/dev/null || echo 0)" -ge 18 ] || fail "the job did not start training"
    grep -q "hosting the rendezvous store" "$work/node2.log" && fail "host 2 hosts the store (it must be host 0)"
    kill -9 "$(cat "$work/node2.pid")"
    for h in 0 1; do finish "$h"; done
    expect_done "world=4 restarts=1 steps=150 sum=1500"
    ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASSED: $scenario"
