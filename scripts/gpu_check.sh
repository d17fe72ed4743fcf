#!/usr/bin/env bash
# The GPU check (issue 32): run on a lent GPU machine from a fresh copy of the repository, it
# builds what the GPU tests need, runs them and the GPU benchmarks, and writes
# $OUT/gpu_check_summary.md (pass/fail per step, figures, the issue's targets, the end of each
# failed step's log), $OUT/gpu_check_logs.tar.gz (one log per step) and $OUT/gpu_compare.json:
# three files, as the run tool brings back at most 8. Sized to finish within 8 minutes on one H100/H200 with 16 cores; every step
# runs under `timeout`, within what is left of the budget (GPU_CHECK_BUDGET_S, 470 s).
#
#   run tool: command "bash scripts/gpu_check.sh", carry [".gpu_check"], timeout_s 540
#   (docs/gpu.md). .gpu_check/ is made here by scripts/gpu_check_bundle.sh: what that machine
#   may lack (GoogleTest's source, dlpack.h, OpenSSL's headers, pybind11, pytest), used only
#   where the machine has none of its own.
#
# Steps: the machine (nvidia-smi, nvcc, torch); configure (Ninja, CUDA for this GPU's
# architecture, the plugin for the torch Python found); build (only the library, tdistrun,
# tdist-bench, the Python module, the plugin and test targets named *cuda*, *gpu*, *nccl* or
# *device*, not *device_mesh*); then, where there is a GPU: ctest -L gpu (the C++ GPU tests: 2, 4 and 8 ranks on the
# one GPU for the tdist backend, the nccl backend at world size 1; tdist-bench --device cuda
# --check), the plugin's CUDA tests (pytest), tdist-bench --device cuda (4 ranks, and the copy
# limit), 8 ranks --check, bench/gpu_compare.py (4 ranks: tdist, Gloo, device copy), and, if time
# is left, the CPU benchmark at 8 and 16 ranks. Without a GPU it stops after the build, failing
# with "no GPU" (a dry run of the build stages).
#
# Exit status: 0 when every step passed, 1 when one failed, 2 when there is no GPU.
#
# Settings (for a dry run elsewhere): GPU_CHECK_BUILD (the build folder, build-gpu),
# GPU_CHECK_BUILD_TYPE (Release), GPU_CHECK_CUDA_ARCH (the GPU's, else 90), GPU_CHECK_JOBS
# (nproc), GPU_CHECK_BUDGET_S (470), GPU_CHECK_BUILD_S (the build's limit, 300), GPU_CHECK_FORCE_BUNDLE=1 (use every piece of .gpu_check/
# even where the machine has its own: tries the fallbacks), TDIST_TORCH_PYTHON (the torch Python).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
OUT=${OUT:-$root/gpu_check_out}
mkdir -p "$OUT"
logs=$OUT/logs  # packed into gpu_check_logs.tar.gz at the end
rm -rf "$logs"
mkdir -p "$logs"
build=${GPU_CHECK_BUILD:-$root/build-gpu}
bundle=$root/.gpu_check
jobs=${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 4)}
budget=${GPU_CHECK_BUDGET_S:-470}
summary=$OUT/gpu_check_summary.md
t_start=$(date +%s)
steps=()      # "name|result|seconds|note"
failed=0
no_gpu=""

say() { echo "gpu_check: $*" | tee -a "$logs/gpu_check.log"; }
left() { echo $((budget - ($(date +%s) - t_start))); }

# step NAME LIMIT_S CMD...: runs CMD under timeout (LIMIT_S or what is left of the budget, the
# smaller), output in $logs/NAME.log; records pass, fail (exit status) or timeout. Returns CMD's status.
step() {
  local name=$1 limit=$2
  shift 2
  local budget_left
  budget_left=$(left)
  if [ "$budget_left" -lt 10 ]; then
    steps+=("$name|not run|0|the budget of ${budget} s was spent")
    say "$name: not run (budget spent)"
    failed=1
    return 125
  fi
  [ "$limit" -gt "$budget_left" ] && limit=$budget_left
  say "$name (up to ${limit} s) ..."
  local t0 rc result
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  local secs=$(($(date +%s) - t0))
  case $rc in
    0) result=pass ;;
    124 | 137) result="timeout (${limit} s)"; failed=1 ;;
    *) result="fail (exit $rc)"; failed=1 ;;
  esac
  steps+=("$name|$result|$secs|$name.log")
  say "$name: $result in ${secs} s"
  return $rc
}

# Only the summary table line of a step that is informative rather than required.
note_step() { steps+=("$1|$2|0|$3"); say "$1: $2 ($3)"; }

# shellcheck disable=SC2317  # called by the EXIT trap
write_summary() {
  {
    echo "# GPU check: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "- machine: $(hostname), $(nproc 2>/dev/null) cores; GPU: ${gpu_name:-none}"
    echo "- torch: ${torch_desc:-none}; nvcc: ${nvcc_desc:-none}"
    echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')"
    echo "- command: OUT=$OUT bash scripts/gpu_check.sh; total $(($(date +%s) - t_start)) s"
    [ -n "$no_gpu" ] && echo "- **no GPU**: $no_gpu"
    echo
    echo "| step | result | seconds | log or note |"
    echo "|---|---|---|---|"
    local s
    for s in "${steps[@]+"${steps[@]}"}"; do
      IFS='|' read -r n r secs note <<<"$s"
      echo "| $n | $r | $secs | $note |"
    done
    if [ -s "$logs/targets.md" ]; then
      echo
      cat "$logs/targets.md"
    fi
    for f in cuda_call_costs gpu_compare bench_cuda_4 bench_cuda_copy_1 bench_cuda_4_hostwait bench_cuda_4_mps bench_cuda_4_staged bench_cuda_4_ipc bench_cpu_8 bench_cpu_16; do
      if [ -s "$logs/$f.log" ]; then
        echo
        echo "## $f"
        echo '```'
        cat "$logs/$f.log"
        echo '```'
      fi
    done
    for s in "${steps[@]+"${steps[@]}"}"; do
      IFS='|' read -r n r secs note <<<"$s"
      case $r in pass | "not run") continue ;; esac
      if [ -s "$logs/$n.log" ]; then
        echo
        echo "## $n: $r (the end of $n.log)"
        echo '```'
        tail -n 40 "$logs/$n.log"
        echo '```'
      fi
    done
  } >"$summary"
  tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$OUT" logs && rm -rf "$logs"
  echo "gpu_check: summary in $summary, logs in $OUT/gpu_check_logs.tar.gz"
}
trap write_summary EXIT

# ---- the machine ---------------------------------------------------------------------------
{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi 2>&1 || echo "(no nvidia-smi)"
  echo "== nvcc"
  nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
  if [ -n "$nvcc" ]; then "$nvcc" --version; else echo "(no nvcc)"; fi
  echo "== cmake, ninja"; cmake --version | head -1; ninja --version
  echo "== cpu, memory, kernel"; nproc; free -g 2>/dev/null | head -2; uname -r
  echo "== MPS (several processes on one GPU without time-slicing)"
  command -v nvidia-cuda-mps-control || echo "(no nvidia-cuda-mps-control)"
} >"$logs/machine.log" 2>&1
cat "$logs/machine.log"
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
nvcc_desc=$([ -n "$nvcc" ] && "$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
gpu_name=$(nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
arch=${GPU_CHECK_CUDA_ARCH:-${arch:-90}}
[ -n "$gpu_name" ] || no_gpu="nvidia-smi lists no GPU"

# A Python with torch 2.x: for the plugin, its tests and bench/gpu_compare.py.
torch_py=""
for c in "${TDIST_TORCH_PYTHON:-}" python3 python /usr/bin/python3 /opt/conda/bin/python /usr/local/bin/python3; do
  [ -n "$c" ] || continue
  p=$(command -v "$c" 2>/dev/null) || continue
  if "$p" -c 'import sys, torch; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' 2>/dev/null; then
    torch_py=$p
    break
  fi
done
if [ -n "$torch_py" ]; then
  torch_desc=$("$torch_py" -c 'import sys, torch; print("torch %s (CUDA %s, cuda available: %s) in %s, Python %d.%d" % (torch.__version__, torch.version.cuda, torch.cuda.is_available(), sys.executable, *sys.version_info[:2]))' 2>&1 | tail -1)
  say "torch: $torch_desc"
else
  say "no Python with torch 2.x found: the plugin, its tests and gpu_compare.py are left out"
fi

# ---- configure -----------------------------------------------------------------------------
force=${GPU_CHECK_FORCE_BUNDLE:-0}
cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${GPU_CHECK_BUILD_TYPE:-Release}" -DTDIST_WITH_CUDA=ON
            -DTDIST_CUDA_ARCHITECTURES="$arch" -DTDIST_BUILD_EXAMPLES=OFF)
[ -n "$nvcc" ] && cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
cxx_flags=""
# What the machine lacks, from the bundle (scripts/gpu_check_bundle.sh).
if { [ "$force" = 1 ] || [ ! -f /usr/include/dlpack/dlpack.h ]; } && [ -f "$bundle/include/dlpack/dlpack.h" ]; then
  cxx_flags+=" -isystem $bundle/include"; say "dlpack.h: the bundle's"
fi
if { [ "$force" = 1 ] || [ ! -f /usr/include/openssl/hmac.h ]; } && [ -d "$bundle/openssl" ]; then
  cmake_args+=(-DOPENSSL_ROOT_DIR="$bundle/openssl"); say "OpenSSL: the bundle's headers and libcrypto"
fi
gtest_installed=0
for f in /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake \
         /usr/local/lib/cmake/GTest/GTestConfig.cmake /usr/lib/*/libgtest.a; do
  [ -f "$f" ] && gtest_installed=1
done
if { [ "$force" = 1 ] || [ "$gtest_installed" = 0 ]; } && [ -d "$bundle/googletest" ]; then
  # CMAKE_DISABLE_FIND_PACKAGE_GTest: the bundle's even where one is installed (forced).
  cmake_args+=(-DTDIST_GTEST_SOURCE="$bundle/googletest" -DCMAKE_DISABLE_FIND_PACKAGE_GTest="$force")
  say "GoogleTest: built from the bundle's source"
fi
if [ -n "$torch_py" ]; then
  cmake_args+=(-DTDIST_TORCH_PYTHON="$torch_py" -DPython3_EXECUTABLE="$torch_py")
  # pybind11: pip's package keeps its CMake files inside site-packages, where find_package does not look.
  pip_pybind11=$("$torch_py" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null)
  if { [ "$force" = 1 ] || { [ -z "$pip_pybind11" ] && [ ! -d /usr/include/pybind11 ]; }; } && [ -d "$bundle/pybind11" ]; then
    cmake_args+=(-Dpybind11_DIR="$bundle/pybind11/lib/cmake/pybind11"); say "pybind11: the bundle's"
  elif [ -n "$pip_pybind11" ] && [ -d "$pip_pybind11" ]; then
    cmake_args+=(-Dpybind11_DIR="$pip_pybind11"); say "pybind11: the torch Python's ($pip_pybind11)"
  fi
  pyver=$("$torch_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  has_python_h=$("$torch_py" -c 'import os, sysconfig; print(int(os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))))')
  if [ "$has_python_h" = 0 ]; then
    if [ -f "$bundle/python/include/python$pyver/Python.h" ]; then
      cmake_args+=(-DPython3_INCLUDE_DIR="$bundle/python/include/python$pyver"
                   -DTDIST_TORCH_PYTHON_INCLUDE="$bundle/python/include/python$pyver")
      cxx_flags+=" -isystem $bundle/python/include"
      say "Python.h: the bundle's (Python $pyver)"
    else
      say "Python.h: none for Python $pyver here or in the bundle: the Python module and the plugin are left out"
    fi
  fi
  if { [ "$force" = 1 ] || ! "$torch_py" -c 'import pytest' 2>/dev/null; } && [ -d "$bundle/pylib" ]; then
    export PYTHONPATH="$bundle/pylib${PYTHONPATH:+:$PYTHONPATH}"; say "pytest: the bundle's"
  fi
fi
# NCCL: the nccl backend includes nccl.h and loads libnccl.so.2 at run time. Where the toolkit has
# neither, torch's own (the nvidia-nccl wheel beside the torch Python's torch).
cuda_home=$([ -n "$nvcc" ] && dirname "$(dirname "$(readlink -f "$nvcc")")")
wheel_nccl=$([ -n "$torch_py" ] && "$torch_py" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
if [ ! -f "$cuda_home/include/nccl.h" ] && [ ! -f /usr/include/nccl.h ]; then
  if [ -f "$wheel_nccl/include/nccl.h" ]; then
    cxx_flags+=" -isystem $wheel_nccl/include"; say "nccl.h: the torch Python's ($wheel_nccl/include)"
  else
    say "nccl.h: none in $cuda_home/include, /usr/include or a torch wheel: the configure step will say what it lacks"
  fi
fi
if [ -z "${TDIST_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' &&
   [ ! -f "$cuda_home/lib/libnccl.so.2" ] && [ ! -f /usr/local/cuda/lib/libnccl.so.2 ] && [ -f "$wheel_nccl/lib/libnccl.so.2" ]; then
  export TDIST_NCCL_LIBRARY=$wheel_nccl/lib/libnccl.so.2; say "libnccl.so.2: the torch Python's ($TDIST_NCCL_LIBRARY)"
fi
[ -n "$cxx_flags" ] && cmake_args+=(-DCMAKE_CXX_FLAGS="$cxx_flags")
# CMake 4 refuses projects that ask for less than 3.5 (GoogleTest's source may): accept them.
cmake_args+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
step configure 120 cmake "${cmake_args[@]}" || exit 1
grep -E "tdist:|PyTorch plugin" "$logs/configure.log" | sed 's/^-- /  /'

# ---- build ---------------------------------------------------------------------------------
targets=(tdist tdistrun tdist-bench)
all_targets=$(ninja -C "$build" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.+-]*\): phony$/\1/p')
for t in _tdist _tdist_torch; do
  grep -qx "$t" <<<"$all_targets" && targets+=("$t")
done
gpu_tests=$(grep -E '^tdist_[A-Za-z0-9_]*(cuda|gpu|nccl|device)[A-Za-z0-9_]*$' <<<"$all_targets" |
            grep -v device_mesh | sort -u | tr '\n' ' ')
# shellcheck disable=SC2206
targets+=($gpu_tests)
say "building: ${targets[*]}"
step build "${GPU_CHECK_BUILD_S:-300}" cmake --build "$build" -j "$jobs" --target "${targets[@]}" || exit 1

if [ -n "$no_gpu" ]; then
  steps+=("gpu|FAIL: no GPU|0|$no_gpu: the build stages ran; no test or benchmark did")
  say "no GPU ($no_gpu): stopping after the build"
  exit 2
fi

# ---- what each CUDA call costs here (bench/cuda_call_costs.cpp): where a small operation's time goes
cuda_inc=${cuda_home:-/usr/local/cuda}/include
cuda_lib=$(ls -d "${cuda_home:-/usr/local/cuda}"/lib64 "${cuda_home:-/usr/local/cuda}"/lib 2>/dev/null | head -1)
# One process alone, then 4 at once on the one GPU (as 4 ranks: the GPU time-slices their contexts).
step cuda_call_costs 50 bash -c "set -o pipefail; g++ -O2 -std=c++20 bench/cuda_call_costs.cpp -I'$cuda_inc' -L'$cuda_lib' \
  -Wl,-rpath,'$cuda_lib' -lcudart -o '$build/bin/cuda_call_costs' && '$build/bin/cuda_call_costs' &&
  '$build/bin/cuda_call_costs' 4 | sort -s -k2,2n"

# ---- tests ---------------------------------------------------------------------------------
export TDIST_JOB_TOKEN=gpu_check  # one job: no warning per rank
# Each GPU test's own limit (its TIMEOUT, 90 s) inside the step's, so that a hung test is killed by
# ctest with its output kept, rather than lost with ctest.
if ! step ctest_gpu 200 ctest --test-dir "$build" -L gpu -LE torch --output-on-failure -j 4; then
  # Which failures are the IPC path's (CUDA IPC may be refused in a sandbox): the failed ones again, staged.
  if [ -s "$build/Testing/Temporary/LastTestsFailed.log" ]; then
    step ctest_gpu_failed_staged 100 env TDIST_CUDA_PATH=staged ctest --test-dir "$build" -L gpu -LE torch \
      --rerun-failed --output-on-failure -j 4
  fi
fi
if [ -n "$torch_py" ] && [ -f "$build/python/tdist/__init__.py" ] && ls "$build"/python/tdist/_tdist_torch*.so >/dev/null 2>&1; then
  # faulthandler_timeout: a test still running after 50 s prints every thread's stack (a hang's place).
  step plugin_pytest 150 env PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" TDIST_EXPECT_TORCH_CUDA=1 \
    "$torch_py" -m pytest -q -rs -p no:cacheprovider -o faulthandler_timeout=50 tests/python/test_torch_cuda.py
else
  note_step plugin_pytest "not run" "the plugin was not built (configure.log says why)"
  failed=1
fi

# ---- benchmarks ----------------------------------------------------------------------------
run=$build/bin/tdistrun
bench=$build/bin/tdist-bench
# The issue's figures first (4 ranks on the GPU, the copy limit), then the wider checks. CSV, which
# the targets below read and the summary shows.
step bench_cuda_4 90 "$run" --standalone --nproc-per-node 4 --no-prefix --no-python "$bench" --device cuda \
  -t all_reduce,all_gather -b 8 -e 256M -f 4 -w 5 -n 20 --place in --copy-limit --csv
step bench_cuda_copy_1 40 "$bench" --device cuda -t copy -b 8 -e 256M -f 4 -w 5 -n 20 --csv
if [ -n "$torch_py" ]; then
  step gpu_compare 150 env PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" \
    "$torch_py" bench/gpu_compare.py --ranks 4 --seconds 0.1 --json "$OUT/gpu_compare.json"
fi
step bench_cuda_8_check 60 "$run" --standalone --nproc-per-node 8 --no-prefix --no-python "$bench" --device cuda \
  -t all_reduce,all_gather,reduce_scatter,broadcast -b 8 -e 4M -f 64 -w 1 -n 3 -c
# Small operations with wait() blocking the host instead of a stream waiting on a host word
# (TDIST_CUDA_WAIT=HOST), against bench_cuda_4's first rows: which ordering costs less, if time is left.
if [ "$(left)" -gt 60 ]; then
  step bench_cuda_4_hostwait 30 env TDIST_CUDA_WAIT=HOST "$run" --standalone --nproc-per-node 4 --no-prefix \
    --no-python "$bench" --device cuda -t all_reduce,all_gather -b 8 -e 64K -f 8 -w 5 -n 20 --place in
else
  note_step bench_cuda_4_hostwait "not run" "optional; $(left) s left"
fi
# Where the staged and the IPC paths cross (TDIST_CUDA_PATH's auto threshold), if time is left.
for path in staged ipc; do
  if [ "$(left)" -gt 60 ]; then
    step "bench_cuda_4_$path" 30 env TDIST_CUDA_PATH=$path "$run" --standalone --nproc-per-node 4 --no-prefix --no-python \
      "$bench" --device cuda -t all_reduce,all_gather -b 8 -e 4M -f 4 -w 5 -n 20 --place in
  else
    note_step "bench_cuda_4_$path" "not run" "optional; $(left) s left"
  fi
done
# The small sizes again under MPS, where the machine has it and time is left: one GPU context for
# the 4 ranks instead of 4 that the GPU time-slices (one lead for the small operations' time).
# The daemon is stopped again before anything else runs.
if command -v nvidia-cuda-mps-control >/dev/null && [ "$(left)" -gt 60 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/tdist-gpu-check-mps CUDA_MPS_LOG_DIRECTORY=/tmp/tdist-gpu-check-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d >"$logs/mps_start.log" 2>&1; then
    step bench_cuda_4_mps 30 "$run" --standalone --nproc-per-node 4 --no-prefix --no-python "$bench" --device cuda \
      -t all_reduce,all_gather -b 8 -e 64K -f 8 -w 5 -n 20 --place in
    echo quit | timeout 10 nvidia-cuda-mps-control >>"$logs/mps_start.log" 2>&1
    sleep 1
  else
    note_step bench_cuda_4_mps "not run" "nvidia-cuda-mps-control -d failed (mps_start.log)"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  note_step bench_cuda_4_mps "not run" "optional: no nvidia-cuda-mps-control, or $(left) s left"
fi
# The CPU benchmark on the 16 cores, if time is left (not required).
for np in 8 16; do
  if [ "$(left)" -gt 70 ]; then
    step "bench_cpu_$np" 45 "$run" --standalone --nproc-per-node "$np" --no-prefix --no-python "$bench" \
      -t all_reduce -b 8 -e 64M -f 8 -w 3 -n 10 --place in
  else
    note_step "bench_cpu_$np" "not run" "optional; $(left) s left"
  fi
done

# ---- the issue's targets ---------------------------------------------------------------------
py_any=${torch_py:-python3}
"$py_any" - "$OUT" "$logs" >"$logs/targets.md" 2>"$logs/targets.log" <<'EOF'
import csv, json, os, sys
out, logs = sys.argv[1], sys.argv[2]
lines = ["## Targets (issue 32: 4 ranks on one GPU, all_reduce of float32)", "",
         "| target | measured | met |", "|---|---|---|"]
def row(target, measured, met):
    lines.append("| %s | %s | %s |" % (target, measured, {True: "yes", False: "**no**", None: "n/a"}[met]))
cmp_path = os.path.join(out, "gpu_compare.json")
if os.path.exists(cmp_path):
    res = json.load(open(cmp_path))
    n = res["world"]
    ar = {r["bytes"]: r for r in res["rows"] if r["coll"] == "all_reduce"}
    big = ar.get(256 << 20, {})
    if big.get("tdist") and big.get("copy"):
        busbw = (256 << 20) * 2 * (n - 1) / n / big["tdist"] / 1e9
        rate = (256 << 20) / big["copy"] / 1e9
        row("busbw of 256 MiB >= half the device copy rate (gpu_compare)",
            "busbw %.1f GB/s, copy %.1f GB/s (ratio %.2f)" % (busbw, rate, busbw / rate), busbw >= rate / 2)
    else:
        row("busbw of 256 MiB >= half the device copy rate (gpu_compare)", "not measured", None)
    ratios = [(b, r["gloo"] / r["tdist"]) for b, r in sorted(ar.items()) if b >= 1 << 20 and r.get("tdist") and r.get("gloo")]
    if ratios:
        worst = min(ratios, key=lambda x: x[1])
        row(">= 20x Gloo's CUDA path from 1 MiB (gpu_compare)",
            "lowest gloo/tdist %.1fx at %d MiB (%s)" % (worst[1], worst[0] >> 20,
                                                         ", ".join("%d MiB %.1fx" % (b >> 20, x) for b, x in ratios)),
            worst[1] >= 20)
    else:
        row(">= 20x Gloo's CUDA path from 1 MiB (gpu_compare)", "not measured", None)
    small = ar.get(8, {})
    if small.get("tdist"):
        row("8 B all_reduce under 20 us (gpu_compare, through torch)", "%.1f us" % (small["tdist"] * 1e6),
            small["tdist"] < 20e-6)
    for what, why in res.get("failed", {}).items():
        row("gpu_compare: " + what, "failed: " + why.replace("|", "/"), False)
else:
    row("gpu_compare", "no results (see gpu_compare.log)", None)
csv_path = os.path.join(logs, "bench_cuda_4.log")
if os.path.exists(csv_path):
    recs = [r for r in csv.DictReader(l for l in open(csv_path) if l.startswith(("library", "tdist")))]
    t8 = [r for r in recs if r["collective"] == "all_reduce" and r["size"] == "8" and r["ip_time_us"]]
    if t8:
        row("8 B all_reduce under 20 us (tdist-bench, C++)", "%s us" % t8[0]["ip_time_us"], float(t8[0]["ip_time_us"]) < 20)
    bb = [r for r in recs if r["collective"] == "all_reduce" and r["size"] == str(256 << 20) and r["ip_busbw"]]
    cp = [r for r in recs if r["collective"] == "copy" and r["size"] == str(256 << 20) and r["oop_algbw"]]
    one_path = os.path.join(logs, "bench_cuda_copy_1.log")
    one = []
    if os.path.exists(one_path):
        one = [r for r in csv.DictReader(l for l in open(one_path) if l.startswith(("library", "tdist")))
               if r["collective"] == "copy" and r["size"] == str(256 << 20) and r["oop_algbw"]]
    if bb and one:
        busbw, rate = float(bb[0]["ip_busbw"]), float(one[0]["oop_algbw"])
        row("busbw of 256 MiB >= half the device copy rate (tdist-bench; copy by one rank alone)",
            "busbw %.1f GB/s, copy %.1f GB/s (ratio %.2f)" % (busbw, rate, busbw / rate if rate else 0), busbw >= rate / 2)
    if bb and cp:
        # This run's copy rows are the 4 ranks copying at once: their sum is what the GPU gave them together.
        row("busbw of 256 MiB (tdist-bench) beside 4 ranks' simultaneous copies",
            "busbw %s GB/s, copies %.1f GB/s in all" % (bb[0]["ip_busbw"], 4 * float(cp[0]["oop_algbw"])), None)
print("\n".join(lines))
EOF

if [ "$failed" = 0 ]; then say "every step passed"; else say "some step failed: see the summary"; fi
exit "$failed"
