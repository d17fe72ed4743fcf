#!/usr/bin/env bash
# The main job: four ranks on this host all-reduce a tensor, started by the launcher.
#
#   scripts/demo.sh [ARGS...]
#
# installs what is missing (as root on Debian, see scripts/test.sh --deps-only), builds the
# library, tdistrun and the examples in build/, then runs
#   build/bin/tdistrun --nproc-per-node 4 build/bin/tdist-example-all_reduce [ARGS...]
# and exits with the launcher's status. TDIST_DEMO_NPROC changes the number of ranks.
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

cmd=("$build/bin/tdistrun" --nproc-per-node "${TDIST_DEMO_NPROC:-4}" "$build/bin/tdist-example-all_reduce" "$@")
printf '\n=== %s\n' "${cmd[*]}"
exec "${cmd[@]}"
