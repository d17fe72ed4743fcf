#!/bin/bash
# expect_job_ends.sh BOUND CMD...: runs an mpirun job in which a rank dies and
# passes when the job ends with an error within BOUND seconds; fails when it
# hangs (killed at BOUND) or reports success.
bound=$1
shift
start=$(date +%s)
timeout --kill-after=10 "$bound" "$@"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "expect_job_ends: the job still ran after ${bound} s: a lost rank left the others hanging" >&2
  exit 1
fi
if [ $rc -eq 0 ]; then
  echo "expect_job_ends: the job exited 0 though a rank died" >&2
  exit 1
fi
echo "expect_job_ends: the job ended with exit code $rc after ${took} s"
