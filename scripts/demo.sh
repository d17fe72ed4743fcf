#!/usr/bin/env bash
# The main job: the tutorial's distributed synchronous SGD (分布式同步SGD) on four ranks of this
# host, started by the launcher: each rank trains the same small network on its part of the
# digits data set (python3-sklearn's digits.csv.gz), all-reducing the gradients after every
# batch; at the end every rank checks that all replicas hold identical weights and prints the
# held-out accuracy.
#
#   scripts/demo.sh [ARGS...]
#
# installs what is missing (as root on Debian, see scripts/test.sh --deps-only), builds the
# library, tdistrun and the examples in build/, then runs
#   build/bin/tdistrun --nproc-per-node 4 --no-python build/bin/tdist-example-sgd_digits [ARGS...]
# and exits with the launcher's status. TDIST_DEMO_NPROC changes the number of ranks,
# TDIST_DEMO_EXAMPLE the example (e.g. all_reduce, ring_all_reduce).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bash scripts/test.sh --deps-only

build=build
gen=()
if [[ ! -f $build/CMakeCache.txt && -z ${CMAKE_GENERATOR:-} ]] && command -v ninja >/dev/null; then
  gen=(-G Ninja)
fi
printf '\n=== configure %s\n' "$build"
cmake -S . -B "$build" ${gen[@]+"${gen[@]}"} -DCMAKE_BUILD_TYPE=RelWithDebInfo

# Only what the demo runs: the library, the launcher and the examples (examples/<name>.cpp is
# the target example_<name>, see examples/CMakeLists.txt), not the tests.
targets=(tdist tdistrun)
for src in examples/*.cpp; do
  [[ -e $src ]] || continue
  name=${src##*/}
  targets+=("example_${name%.cpp}")
done
printf '\n=== build %s\n' "${targets[*]}"
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}"

example=${TDIST_DEMO_EXAMPLE:-sgd_digits}
cmd=("$build/bin/tdistrun" --nproc-per-node "${TDIST_DEMO_NPROC:-4}" --no-python "$build/bin/tdist-example-$example" "$@")
printf '\n=== %s\n' "${cmd[*]}"
exec "${cmd[@]}"
