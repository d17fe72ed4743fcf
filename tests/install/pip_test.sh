#!/usr/bin/env bash
# CTest install.pip (tests/install/CMakeLists.txt sets the TDIST_PT_* environment): the Python
# wheel end to end, as docs/install.md tells a user to make and use it.
#  1. the wheels the build and the install need (build, scikit-build-core, pybind11, numpy and
#     what they depend on) in the wheelhouse (TDIST_WHEELHOUSE, default ~/.cache/tdist/wheels,
#     which scripts/torch_venv.sh also fills): what it lacks is fetched from the package index
#     (through pip's cache); with no index and not all of them there, the test is skipped (77).
#     Every later pip command runs offline against the wheelhouse.
#  2. `python -m build --wheel` in a venv that has only `build`: an isolated build, which sees no
#     torch and so makes the wheel without the PyTorch plugin; the wheel's files; and
#     `python -m build --sdist`, whose files are compared with git's (the build is not repeated
#     from it: `python -m build` alone would build the same wheel from that sdist).
#  3. the wheel installed into a fresh venv (no system site-packages): RPATHs of its ELF files
#     ($ORIGIN only, no folder of the build), `tdistrun --help` and `tdist-trace --help` from the
#     venv's bin, the installed build info (check_installed_python.py), and
#     `tdistrun --nproc-per-node 2 pip_all_reduce.py` (a checked all_reduce, with the venv's Python).
#  4. with a torch venv (TDIST_PT_TORCH_PYTHON, the same Python version): a fresh venv that sees
#     that torch through a .pth file, scikit-build-core and pybind11 installed into it,
#     `pip install --no-build-isolation <source>` (the plugin is built), `import tdist.torch`, and
#     a 2-rank torch all_reduce on backend "tdist" under that venv's tdistrun.
# The compilers run through ccache where it is installed; the build folders lie at fixed places
# under TDIST_PT_WORK_DIR so that a second run finds its objects in the cache. Every file the
# test makes lies under TDIST_PT_WORK_DIR, removed at the end (TDIST_PT_KEEP=1 keeps it).
# Exit 0: passed; 77: skipped; anything else: failed.
set -euo pipefail

src=${TDIST_PT_SOURCE_DIR:?set by CTest: the repository root}
work=${TDIST_PT_WORK_DIR:?set by CTest: a folder of the build tree}
python=${TDIST_PT_PYTHON:-/usr/bin/python3}
torch_python=${TDIST_PT_TORCH_PYTHON:-}
wheels=${TDIST_WHEELHOUSE:-$HOME/.cache/tdist/wheels}
jobs=${TDIST_PT_JOBS:-2}
here=$src/tests/install

start=$SECONDS
step_start=$SECONDS
step() { printf '\n== pip test (%d s): %s\n' "$((SECONDS - start))" "$*"; step_start=$SECONDS; }
took() { printf 'pip test: %s took %d s\n' "$1" "$((SECONDS - step_start))"; }
fail() { printf 'pip test: FAILED: %s\n' "$*" >&2; exit 1; }
skip() { printf 'pip test: SKIPPED: %s\n' "$*"; exit 77; }
# Runs a command with its output in a log, shown only when it fails.
logged() {
  local log=$1; shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    return 1
  fi
}

"$python" -c 'import venv, ensurepip' 2>/dev/null \
  || skip "$python cannot make venvs with pip (Debian: apt-get install python3-venv)"
command -v readelf >/dev/null || skip "readelf is not installed (binutils)"

rm -rf "$work"
mkdir -p "$work"
cleanup() {
  if [[ ${TDIST_PT_KEEP:-0} != 1 ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
tmp=$work/tmp
mkdir -p "$tmp"
# pip, build and CMake write their temporary files here, and it goes with the rest.
export TMPDIR=$tmp
# Nothing of the caller's Python setup leaks in.
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV TDIST_TORCH_PYTHON TDIST_WITH_CUDA TDIST_RUN_BINARY LD_LIBRARY_PATH
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# ---------------------------------------------------------------------------------------------
step "wheels for the build and the install in $wheels"
venv_build=$work/venv-build
"$python" -m venv "$venv_build"
pip=("$venv_build/bin/python" -m pip)
needed=(build "scikit-build-core>=0.10" "pybind11>=2.10,<3" numpy)
mkdir -p "$wheels"
if "${pip[@]}" download --no-index --find-links "$wheels" --only-binary :all: --dest "$wheels" "${needed[@]}" \
     >"$tmp/wheels-offline.log" 2>&1; then
  echo "all in the wheelhouse already"
elif logged "$tmp/wheels-online.log" "${pip[@]}" download --retries 1 --timeout 20 --only-binary :all: \
     --dest "$wheels" "${needed[@]}"; then
  echo "fetched what the wheelhouse lacked from the package index"
else
  skip "the package index is unreachable and the wheelhouse $wheels lacks some of: ${needed[*]} (see above)"
fi
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheels
logged "$tmp/pip-build.log" "${pip[@]}" install build || fail "installing build into $venv_build from $wheels"
took "getting the wheels"

# The compilers through ccache, paths relative to the folder above the sources and the build.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  base=$src
  while [[ $work != "$base"/* && $base != / ]]; do base=$(dirname "$base"); done
  if [[ $base != / ]]; then export CCACHE_BASEDIR=$base; fi
  echo "ccache: on (base_dir ${CCACHE_BASEDIR:-as configured})"
else
  echo "ccache: not installed, every object is compiled"
fi
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs

# ---------------------------------------------------------------------------------------------
step "python -m build --wheel $src (isolated: no torch, no plugin)"
dist=$work/dist
(cd "$src" && logged "$tmp/build-wheel.log" "$venv_build/bin/python" -m build --wheel --outdir "$dist" \
   -C build-dir="$work/build-wheel" "$src") || fail "python -m build --wheel (log above)"
wheel=$(ls "$dist"/tdist-*.whl)
took "building the wheel"
echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB)"
grep -E "PyTorch plugin: not built|tdist: building the Python module" "$tmp/build-wheel.log" || true

"$venv_build/bin/python" - "$wheel" <<'EOF' || fail "the wheel's files (above)"
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
problems = []
for need in ["tdist/__init__.py", "tdist/_build_info.py", "tdist/_programs.py", "tdist/run.py",
             "tdist/lib/libtdist.so.0", "tdist/bin/tdistrun", "tdist/bin/tdist-trace"]:
    if need not in names:
        problems.append("lacks " + need)
if not any(n.startswith("tdist/_tdist.") and n.endswith(".so") for n in names):
    problems.append("lacks the extension tdist/_tdist.*.so")
if any(n.startswith("tdist/_tdist_torch") for n in names):
    problems.append("has the PyTorch plugin although its build had no torch")
for n in names:
    top = n.split("/")[0]
    if top != "tdist" and not top.endswith(".dist-info"):
        problems.append("has %s outside the package" % n)
    if n.startswith("tdist/lib/") and n != "tdist/lib/libtdist.so.0":
        problems.append("has %s besides tdist/lib/libtdist.so.0" % n)
entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
text = zipfile.ZipFile(sys.argv[1]).read(entry_points[0]).decode() if entry_points else ""
for command in ("tdistrun = tdist._programs:tdistrun", "tdist-trace = tdist._programs:tdist_trace"):
    if command not in text:
        problems.append("its entry points lack '%s'" % command)
for p in problems:
    print("wheel: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
print("wheel files OK: %d files, %s" % (len(names), ", ".join(sorted(n for n in names if "/bin/" in n or "/lib/" in n or n.endswith(".so")))))
EOF

# `python -m build` without --wheel makes the sdist first and the wheel from it: the sdist must
# hold every file the build reads (scikit-build-core takes what git does not ignore). Checked
# against git's list, without building a second time.
step "python -m build --sdist: every source the build reads is in it"
(cd "$src" && logged "$tmp/build-sdist.log" "$venv_build/bin/python" -m build --sdist --outdir "$dist" "$src") \
  || fail "python -m build --sdist (log above)"
sdist=$(ls "$dist"/tdist-*.tar.gz)
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  "$venv_build/bin/python" - "$sdist" "$src" <<'EOF' || fail "the sdist's files (above)"
import os
import subprocess
import sys
import tarfile

sdist, src = sys.argv[1], sys.argv[2]
with tarfile.open(sdist) as tar:
    root = tar.getnames()[0].split("/")[0]
    names = {n[len(root) + 1:] for n in tar.getnames()}
tracked = subprocess.run(["git", "-C", src, "ls-files"], check=True, capture_output=True, text=True).stdout.split()
read_by_build = [f for f in tracked if os.path.exists(os.path.join(src, f)) and (
    f in ("CMakeLists.txt", "pyproject.toml", "README.md")
    or f.split("/")[0] in ("cmake", "include", "src", "tools")
    or f.startswith("python/"))]
missing = [f for f in read_by_build if f not in names]
for f in missing:
    print("sdist lacks " + f, file=sys.stderr)
if missing:
    sys.exit(1)
print("sdist %s: %d files, every one of the %d the build reads" % (os.path.basename(sdist), len(names), len(read_by_build)))
EOF
else
  echo "(not a git checkout: the sdist's files are not compared with git's list)"
fi

# ---------------------------------------------------------------------------------------------
# Checks an installed package's ELF files: RPATHs only relative to $ORIGIN, no folder of the
# build in them, and the libraries they need found (the plugin's torch libraries excepted:
# `import torch` loads those).
check_elf_files() {
  local pkg=$1 f rpath entry deps n=0
  while IFS= read -r f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    rpath=$(readelf -d "$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
    IFS=: read -r -a entries <<<"$rpath"
    for entry in ${entries[@]+"${entries[@]}"}; do
      [[ $entry == '$ORIGIN'* ]] || fail "$f has the RPATH entry $entry, not relative to \$ORIGIN"
    done
    if grep -q -F "$work" "$f"; then fail "$f names the build folder $work"; fi
    deps=$(ldd "$f" 2>&1) || true
    if grep 'not found' <<<"$deps" | grep -v -E 'libtorch|libc10' | grep -q .; then
      fail "$f misses libraries: $(grep 'not found' <<<"$deps" | tr -s ' \t\n' ' ')"
    fi
    printf '  %s: RPATH %s\n' "${f#"$pkg"/}" "${rpath:-(none)}"
    n=$((n + 1))
  done < <(find "$pkg" -type f \( -name '*.so*' -o -path '*/bin/*' \) | sort)
  ((n >= 4)) || fail "found only $n ELF files in $pkg"
  if grep -l -r -F "$src" "$pkg" --include='*.so*' >/dev/null 2>&1; then
    echo "  (the source folder $src appears in: $(grep -l -r -F "$src" "$pkg" | tr '\n' ' '))"
  fi
}

platlib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])'; }

# Runs `tdistrun --standalone --nproc-per-node 2 SCRIPT` from the venv's bin, as torchrun is run
# (the script with the venv's Python: the entry point hands it over as PYTHON_EXEC), and checks
# that both ranks printed PATTERN from the tdist installed there.
run_two_ranks() {
  local venv=$1 script=$2 pattern=$3 out rc=0
  out=$(cd "$tmp" && timeout 180 "$venv/bin/tdistrun" --standalone --nproc-per-node 2 "$script" 2>&1) \
    || rc=$?
  printf '%s\n' "$out"
  ((rc == 0)) || fail "$venv/bin/tdistrun --nproc-per-node 2 ${script##*/} exited $rc"
  for rank in 0 1; do
    grep -q "rank $rank of 2.*: OK" <<<"$out" || fail "rank $rank did not report '$pattern: OK'"
    grep -q "rank $rank of 2.* from $(platlib "$venv")/tdist" <<<"$out" \
      || fail "rank $rank did not run the tdist installed in $venv"
  done
}

step "the wheel in a fresh venv"
venv_run=$work/venv-run
"$python" -m venv "$venv_run"
logged "$tmp/pip-install.log" "$venv_run/bin/python" -m pip install "$wheel" || fail "pip install $wheel"
site=$(platlib "$venv_run")
took "installing the wheel"
check_elf_files "$site/tdist"
(cd "$tmp" && "$venv_run/bin/tdistrun" --help >/dev/null) || fail "$venv_run/bin/tdistrun --help failed"
(cd "$tmp" && "$venv_run/bin/tdist-trace" --help >/dev/null) || fail "$venv_run/bin/tdist-trace --help failed"
echo "tdistrun --help and tdist-trace --help from $venv_run/bin: OK"
(cd "$tmp" && "$venv_run/bin/python" "$here/check_installed_python.py" "$site" "$site/tdist/bin" 0 1) \
  || fail "the installed package's build info (above)"
(cd "$tmp" && "$venv_run/bin/python" -c 'from tdist import _build_info as b; assert b.WHEEL is True, b.WHEEL') \
  || fail "_build_info.WHEEL is not True in the wheel"
run_two_ranks "$venv_run" "$here/pip_all_reduce.py" "pip all_reduce"

# ---------------------------------------------------------------------------------------------
if [[ -z $torch_python ]]; then
  echo "(no torch venv given (TDIST_TORCH_PYTHON): the wheel with the PyTorch plugin is not checked)"
  step "passed"
  exit 0
fi
step "pip install --no-build-isolation $src in a venv that sees the torch of $torch_python"
torch_info=$("$torch_python" -c 'import os, sys, torch; print("%d.%d" % sys.version_info[:2], os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null) \
  || fail "$torch_python cannot import torch"
read -r torch_pyver torch_site <<<"$torch_info"
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $torch_pyver == "$pyver" ]] || fail "$torch_python is Python $torch_pyver, $python is $pyver: the plugin needs one"
venv_torch=$work/venv-torch
"$python" -m venv "$venv_torch"
echo "$torch_site" >"$(platlib "$venv_torch")/tdist_test_torch.pth"
logged "$tmp/pip-torch-requires.log" "$venv_torch/bin/python" -m pip install "scikit-build-core>=0.10" "pybind11>=2.10,<3" \
  || fail "installing scikit-build-core and pybind11 into $venv_torch"
(cd "$src" && logged "$tmp/pip-torch.log" "$venv_torch/bin/python" -m pip install -v --no-build-isolation \
   --config-settings build-dir="$work/build-torch" "$src") || fail "pip install --no-build-isolation $src (log above)"
took "building and installing with the plugin"
grep -E "PyTorch plugin: (building|serves)" "$tmp/pip-torch.log" || true
check_elf_files "$(platlib "$venv_torch")/tdist"
(cd "$tmp" && "$venv_torch/bin/python" -c 'import tdist.torch, tdist._build_info as b; assert b.TORCH_PLUGIN is True; print("import tdist.torch: OK, devices", tdist.torch.DEVICES)') \
  || fail "import tdist.torch in $venv_torch"
run_two_ranks "$venv_torch" "$here/pip_torch_all_reduce.py" "pip torch all_reduce"

step "passed"
