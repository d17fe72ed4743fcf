#!/usr/bin/env bash
# Runs every test of tdist: the normal build (build/, RelWithDebInfo) and its CTest suite, then
# the sanitizer build (build-asan/, ASan + UBSan, leaks checked) and its suite.
# On a fresh Debian 12 machine, as root, it first installs what it needs with apt-get.
#
#   scripts/test.sh                 everything (what CI runs through .ci/run)
#   scripts/test.sh --no-asan       only the normal build
#   scripts/test.sh --only-asan     only the sanitizer build
#   scripts/test.sh --deps-only     only install the dependencies (scripts/demo.sh uses this)
#   scripts/test.sh --deps-only --dry-run   say which packages are missing, install nothing
#   scripts/test.sh -- ARGS...      extra arguments for ctest (e.g. -- -R store -L install)
#
# Environment: TDIST_TEST_JOBS (ctest -j, default: the core count, at most 8),
# TDIST_BUILD_JOBS (build -j, default: the core count), TDIST_SKIP_APT=1 (never run apt-get),
# TDIST_EXTRA_PACKAGES (more Debian packages to install), TDIST_NO_TORCH=1 (no torch venv: the
# PyTorch plugin and its tests are left out), TDIST_TORCH_VENV/TDIST_WHEELHOUSE/TDIST_TORCH_SPEC
# (see scripts/torch_venv.sh), ASAN_OPTIONS/UBSAN_OPTIONS (added to,
# and overriding, the sanitizer defaults), CMAKE_GENERATOR (default Ninja when ninja is there).
# Exits non-zero when anything fails; the last lines summarise each build.
set -euo pipefail

# Debian packages the build and the tests need (build-essential brings g++ and the ASan/UBSan
# runtimes; binutils' objdump and libc's ldd are used by the install test; libssl-dev: OpenSSL's
# libcrypto for the job token's HMAC-SHA256 and nonces). The SGD example
# (examples/sgd_digits.cpp) reads the digits data set that python3-sklearn ships, with zlib.
# The Python module (python/) needs Debian's Python headers, pybind11, NumPy and pytest; the
# PyTorch plugin (python/torch/) is built for torch 2.x from the Python package index, in a
# virtual environment (python3-venv) that scripts/torch_venv.sh keeps. The emulated-cluster tests
# (tests/cluster, scripts/cluster.sh) need iproute2, and iptables where the kernel has no netem.
# Open MPI: the mpi backend, its tests under mpirun (tests/mpi) and bench/compare.sh's peer.
# ccache: a machine that runs the tests again (CI) compiles only what changed since.
TDIST_PACKAGES=(build-essential cmake ninja-build ccache pkg-config openmpi-bin libopenmpi-dev
  libgtest-dev libgmock-dev libbenchmark-dev libdlpack-dev libssl-dev
  zlib1g-dev python3-sklearn
  python3-dev pybind11-dev python3-numpy python3-pytest python3-venv
  iproute2 iptables)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

log() { printf '\n=== %s\n' "$*"; }

# ---------------------------------------------------------------------------------------------
# Dependencies: apt-get only for what is missing, `apt-get update` at most once.
package_installed() {
  [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]
}

install_dependencies() {  # $1: 1 for a dry run
  local dry_run=$1 pkg
  local -a wanted=("${TDIST_PACKAGES[@]}") missing=()
  if [[ -n ${TDIST_EXTRA_PACKAGES:-} ]]; then
    read -r -a extra <<<"$TDIST_EXTRA_PACKAGES"
    wanted+=("${extra[@]}")
  fi
  if ! command -v dpkg-query >/dev/null; then
    echo "dependencies: no dpkg here (not Debian); make sure these are installed: ${wanted[*]}"
    return 0
  fi
  for pkg in "${wanted[@]}"; do
    package_installed "$pkg" || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "dependencies: all present (${wanted[*]})"
    return 0
  fi
  echo "dependencies: missing: ${missing[*]}"
  if ((dry_run)); then
    echo "dependencies: dry run, would run: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
    return 0
  fi
  if [[ ${TDIST_SKIP_APT:-0} == 1 ]]; then
    echo "dependencies: TDIST_SKIP_APT=1, not installing them; the build may fail"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "dependencies: not root, not installing them; as root: apt-get install ${missing[*]}"
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "dependencies: no apt-get; install them by hand: ${missing[*]}"
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  local -a apt_opts=(-q -o Acquire::Retries=3 -o Dpkg::Use-Pty=0)
  log "apt-get update"
  apt-get "${apt_opts[@]}" update
  log "apt-get install ${missing[*]}"
  apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
}

# ---------------------------------------------------------------------------------------------
nproc_=$(nproc 2>/dev/null || echo 2)
build_jobs=${TDIST_BUILD_JOBS:-$nproc_}
# Tests start several processes each (ranks); more parallel tests than cores only makes them
# slow and timing-sensitive, so one test per core, and at most 8.
test_jobs=${TDIST_TEST_JOBS:-$((nproc_ < 8 ? nproc_ : 8))}

generator_args() {  # $1: build dir. Keeps the generator of an existing build dir.
  if [[ -f $1/CMakeCache.txt ]]; then
    return 0
  fi
  if [[ -n ${CMAKE_GENERATOR:-} ]]; then
    return 0  # cmake reads it from the environment
  fi
  if command -v ninja >/dev/null; then
    printf '%s\n' -G Ninja
  fi
}

declare -a summaries=()
status=0 total_passed=0 total_failed=0

# run_suite NAME DIR CMAKE-ARGS... : configure, build and test one build; records a summary.
run_suite() {
  local name=$1 dir=$2
  shift 2
  local start=$SECONDS
  local -a gen=() launcher=()
  mapfile -t gen < <(generator_args "$dir")
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # Paths relative to the checkout, and the build folder left out of the hash, so that a
    # fresh clone in another folder hits the objects of the last one.
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  fi

  log "$name: configure $dir"
  if ! cmake -S . -B "$dir" ${gen[@]+"${gen[@]}"} ${launcher[@]+"${launcher[@]}"} "$@"; then
    summaries+=("$name ($dir): FAILED to configure")
    status=1
    return 1
  fi
  log "$name: build $dir (-j$build_jobs)"
  if ! cmake --build "$dir" -j "$build_jobs"; then
    summaries+=("$name ($dir): FAILED to build ($((SECONDS - start))s)")
    status=1
    return 1
  fi
  log "$name: ctest -j$test_jobs in $dir"
  local ctest_log=$dir/ctest-summary.log rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" --timeout 300 --no-tests=error \
    ${ctest_args[@]+"${ctest_args[@]}"} 2>&1 | tee "$ctest_log" || rc=$?
  local result
  result=$(grep -E 'tests passed|No tests were found' "$ctest_log" | tail -n 1 || true)
  if [[ $result =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    total_failed=$((total_failed + BASH_REMATCH[1]))
    total_passed=$((total_passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  if ((rc == 0)); then
    summaries+=("$name ($dir): PASSED: ${result:-ok} ($((SECONDS - start))s)")
  else
    summaries+=("$name ($dir): FAILED: ${result:-ctest exited $rc} ($((SECONDS - start))s)")
    # The failed tests' names again at the very end, where a log cut to its tail still shows them.
    local failed
    failed=$(sed -n '/The following tests FAILED:/,$p' "$ctest_log" | grep -E '^[[:space:]]+[0-9]+ - ' || true)
    if [[ -n $failed ]]; then
      summaries+=("$failed")
    fi
    status=1
  fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------
deps_only=0 dry_run=0 normal=1 asan=1
declare -a ctest_args=()
while (($#)); do
  case $1 in
    --deps-only) deps_only=1 ;;
    --dry-run) dry_run=1 ;;
    --no-asan) asan=0 ;;
    --only-asan) normal=0 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log "dependencies"
install_dependencies "$dry_run"
if ((deps_only)); then
  exit 0
fi
if ((dry_run)); then
  echo "test.sh: --dry-run only applies to the dependencies (with --deps-only)" >&2
  exit 2
fi

echo "repo: $repo; $(cmake --version | head -n 1); $(c++ --version | head -n 1); $nproc_ cores"
normal_built=1
if ((normal)); then
  declare -a torch_args=()
  if [[ ${TDIST_NO_TORCH:-0} != 1 ]]; then
    log "torch 2.x for the PyTorch plugin (scripts/torch_venv.sh)"
    if torch_python=$(bash scripts/torch_venv.sh | tail -n 1); then
      torch_args=("-DTDIST_TORCH_PYTHON=$torch_python")
    else
      summaries+=("torch venv: FAILED (scripts/torch_venv.sh); the plugin and its tests are left out")
      status=1
    fi
  fi
  run_suite "normal build" build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDIST_SANITIZE=OFF \
    ${torch_args[@]+"${torch_args[@]}"} || true
  if [[ ${summaries[-1]} == *"FAILED to"* ]]; then normal_built=0; fi
fi

if ((asan)); then
  if ((normal_built)); then
    # Any sanitizer report ends the process with a stack trace; leaks are errors.
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:report_error_type=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    # -O1 with line tables only: the optimisation level the sanitizers are designed for, full
    # stack traces, and a build about 40% faster than -O2 -g (the sanitizer build is the
    # longest part of CI on 2 cores).
    run_suite "sanitizer build" build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DTDIST_SANITIZE=ON || true
  else
    summaries+=("sanitizer build (build-asan): SKIPPED (the normal build failed to build)")
    status=1
  fi
fi

log "summary"
printf '%s\n' "${summaries[@]}"
# Both builds' tests counted together, in the plain form CI reads.
printf 'total: %d passed, %d failed\n' "$total_passed" "$total_failed"
exit "$status"
