#!/usr/bin/env bash
# CTest install.consumer (see CMakeLists.txt here, which sets the TDIST_IT_* environment):
#  1. cmake --install <build> --prefix <tmp>, and check the installed layout;
#  2. every public header compiles on its own from <tmp>/include;
#  3. consumer/ configured with find_package(tdist) (CMAKE_PREFIX_PATH=<tmp>), built, run, then
#     installed to a second prefix and run from there (it finds libtdist through the RPATH
#     tdist::tdist gives it, which CMake keeps at install; LD_LIBRARY_PATH is cleared);
#  4. consumer/main.cpp compiled with g++ -std=c++20 $(pkg-config --cflags --libs tdist), run
#     without LD_LIBRARY_PATH (tdist.pc's Libs carry the RPATH);
#  5. with the Python module built: the installed package imported with only its folder on
#     PYTHONPATH (check_installed_python.py: the installed libtdist, build info and tdistrun; the
#     PyTorch plugin installed next to it and running a collective); then, the plugin removed
#     from the prefix, `import tdist.torch` must say that the installation lacks it.
# Usage: install_test.sh [CONFIG]. Exit 0: passed; 77: skipped; anything else: failed.
set -euo pipefail

config=${1:-}
build=${TDIST_IT_BUILD_DIR:?set by CTest}
here=${TDIST_IT_SOURCE_DIR:?set by CTest}
cmake=${TDIST_IT_CMAKE:-cmake}
generator=${TDIST_IT_GENERATOR:-}
make_program=${TDIST_IT_MAKE_PROGRAM:-}
cxx=${TDIST_IT_CXX:-g++}
read -r -a cxx_flags <<<"${TDIST_IT_CXX_FLAGS:-}"
read -r -a programs <<<"${TDIST_IT_PROGRAMS:-}"
libdir_rel=${TDIST_IT_LIBDIR:-lib}
includedir_rel=${TDIST_IT_INCLUDEDIR:-include}
bindir_rel=${TDIST_IT_BINDIR:-bin}
python=${TDIST_IT_PYTHON:-/usr/bin/python3}
py_dir_rel=${TDIST_IT_PY_DIR:-$libdir_rel/python3/dist-packages}
py_module=${TDIST_IT_PY_MODULE:-0}
torch_plugin=${TDIST_IT_TORCH_PLUGIN:-0}

step() { printf '\n== install test: %s\n' "$*"; }
fail() { printf 'install test: FAILED: %s\n' "$*" >&2; exit 1; }
skip() { printf 'install test: SKIPPED: %s\n' "$*"; exit 77; }

for d in "$libdir_rel" "$includedir_rel" "$bindir_rel"; do
  case $d in /*) skip "CMAKE_INSTALL_*DIR $d is absolute, so the build cannot be installed to a temporary prefix" ;; esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdist-install-test.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
prefix=$tmp/prefix
libdir=$prefix/$libdir_rel
includedir=$prefix/$includedir_rel
bindir=$prefix/$bindir_rel
cmakedir=$libdir/cmake/tdist
pcdir=$libdir/pkgconfig

# ---------------------------------------------------------------------------------------------
step "cmake --install $build --prefix $prefix"
install_args=(--install "$build" --prefix "$prefix")
if [[ -n $config ]]; then install_args+=(--config "$config"); fi
"$cmake" "${install_args[@]}"

step "installed layout"
[[ -f $includedir/tdist/tdist.h ]] || fail "$includedir/tdist/tdist.h is missing"
[[ -e $libdir/libtdist.so ]] || fail "$libdir/libtdist.so (the development symlink) is missing"
soname=$(objdump -p "$libdir/libtdist.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }') || true
if [[ -n $soname ]]; then
  [[ -e $libdir/$soname ]] || fail "$libdir/$soname (the SONAME of libtdist.so) is missing"
fi
for f in tdistConfig.cmake tdistConfigVersion.cmake tdistTargets.cmake; do
  [[ -f $cmakedir/$f ]] || fail "$cmakedir/$f is missing"
done
[[ -f $pcdir/tdist.pc ]] || fail "$pcdir/tdist.pc is missing"
grep -qx "prefix=$prefix" "$pcdir/tdist.pc" \
  || fail "tdist.pc does not name the install prefix $prefix: $(grep '^prefix=' "$pcdir/tdist.pc")"
for p in ${programs[@]+"${programs[@]}"}; do
  [[ -x $bindir/$p ]] || fail "program $bindir/$p is missing"
  # An installed program finds every library by itself, libtdist too when it uses it
  # (RPATH $ORIGIN/../lib), and that is the installed one, not the build tree's.
  deps=$(env -u LD_LIBRARY_PATH ldd "$bindir/$p") || fail "ldd $bindir/$p: $deps"
  if grep -q 'not found' <<<"$deps"; then
    fail "$bindir/$p misses libraries once installed: $(grep 'not found' <<<"$deps" | tr -s ' \t\n' ' ')"
  fi
  resolved=$(awk '$1 ~ /^libtdist\.so/ { print $3 }' <<<"$deps")
  if [[ -n $resolved ]]; then
    [[ $(realpath "$resolved") == "$(realpath "$libdir/${soname:-libtdist.so}")" ]] \
      || fail "$bindir/$p loads $resolved, not the installed $libdir/${soname:-libtdist.so}"
    echo "$p: libtdist from $resolved"
  else
    echo "$p: does not use libtdist"
  fi
  env -u LD_LIBRARY_PATH "$bindir/$p" --help >/dev/null || fail "$bindir/$p --help failed (exit $?)"
done
echo "layout OK: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

# ---------------------------------------------------------------------------------------------
step "each public header compiles on its own from $includedir"
n=0
for h in "$includedir"/tdist/*.h; do
  printf '#include <tdist/%s>\n#include <tdist/%s>\n' "${h##*/}" "${h##*/}" \
    | "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -I"$includedir" -x c++ - \
    || fail "<tdist/${h##*/}> does not compile on its own (or twice) from the installed headers"
  n=$((n + 1))
done
echo "$n headers OK"

# ---------------------------------------------------------------------------------------------
step "consumer through find_package(tdist)"
cbuild=$tmp/consumer-cmake
configure_args=(-S "$here/consumer" -B "$cbuild"
  -DCMAKE_PREFIX_PATH="$prefix"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_CXX_COMPILER="$cxx"
  -DCMAKE_CXX_FLAGS="${TDIST_IT_CXX_FLAGS:-}")
if [[ -n $generator ]]; then configure_args+=(-G "$generator"); fi
if [[ -n $make_program ]]; then configure_args+=(-DCMAKE_MAKE_PROGRAM="$make_program"); fi
if [[ -n $config ]]; then configure_args+=(-DCMAKE_BUILD_TYPE="$config"); fi
# CMAKE_PREFIX_PATH from the caller's environment must not point it somewhere else.
configure_log=$(env -u CMAKE_PREFIX_PATH -u tdist_DIR -u tdist_ROOT "$cmake" "${configure_args[@]}" 2>&1) \
  || { printf '%s\n' "$configure_log"; fail "configuring the consumer against $prefix"; }
printf '%s\n' "$configure_log"
grep -q "from $cmakedir" <<<"$configure_log" \
  || fail "find_package(tdist) did not pick the package installed in $cmakedir"
build_args=(--build "$cbuild")
if [[ -n $config ]]; then build_args+=(--config "$config"); fi
"$cmake" "${build_args[@]}" || fail "building the consumer with find_package(tdist)"
exe=$(find "$cbuild" -type f -name tdist-consumer -perm -u+x | head -n 1)
[[ -n $exe ]] || fail "the consumer program was not built"
env -u LD_LIBRARY_PATH "$exe" || fail "the consumer built with find_package(tdist) failed (exit $?)"
# Installed, CMake drops the RPATH it gave the program in its build tree: tdist::tdist's own
# (-Wl,-rpath,<prefix>/lib) must remain.
"$cmake" --install "$cbuild" --prefix "$tmp/consumer-prefix" ${config:+--config "$config"} \
  || fail "installing the consumer built with find_package(tdist)"
env -u LD_LIBRARY_PATH "$tmp/consumer-prefix/bin/tdist-consumer" \
  || fail "the consumer built with find_package(tdist) and installed to $tmp/consumer-prefix failed (exit $?): it cannot find libtdist without LD_LIBRARY_PATH ($(readelf -d "$tmp/consumer-prefix/bin/tdist-consumer" | grep -E 'RPATH|RUNPATH' | tr -s ' ' || echo 'no RPATH'))"

# ---------------------------------------------------------------------------------------------
step "consumer through pkg-config"
command -v pkg-config >/dev/null || skip "pkg-config is not installed (the find_package part passed)"
export PKG_CONFIG_PATH=$pcdir
pkg-config --validate tdist || fail "pkg-config --validate tdist"
version=$(pkg-config --modversion tdist)
read -r -a pc_flags <<<"$(pkg-config --cflags --libs tdist)"
echo "pkg-config --cflags --libs tdist: ${pc_flags[*]}"
"$cxx" -std=c++20 ${cxx_flags[@]+"${cxx_flags[@]}"} -DTDIST_EXPECTED_VERSION="\"$version\"" \
  "$here/consumer/main.cpp" -o "$tmp/consumer-pkgconfig" "${pc_flags[@]}" \
  || fail "compiling the consumer with pkg-config's flags"
env -u LD_LIBRARY_PATH "$tmp/consumer-pkgconfig" \
  || fail "the consumer built with pkg-config failed (exit $?) without LD_LIBRARY_PATH: tdist.pc's Libs must let it find $libdir/${soname:-libtdist.so}"

# ---------------------------------------------------------------------------------------------
if [[ $py_module != 1 || $py_dir_rel == /* ]]; then
  echo "(the Python module was not built, or TDIST_PY_INSTALL_DIR is absolute: its installation is not checked)"
  step "passed"
  exit 0
fi
py_dir=$prefix/$py_dir_rel
step "the installed Python package in $py_dir"
[[ -f $py_dir/tdist/__init__.py ]] || fail "$py_dir/tdist/__init__.py is missing"
compgen -G "$py_dir/tdist/_tdist.*so" >/dev/null || fail "the extension _tdist is missing from $py_dir/tdist"
if [[ $torch_plugin == 1 ]]; then
  compgen -G "$py_dir/tdist/_tdist_torch.*so" >/dev/null \
    || fail "the PyTorch plugin (_tdist_torch) was built but is missing from $py_dir/tdist"
fi
has_tdistrun=0
for p in ${programs[@]+"${programs[@]}"}; do [[ $p == tdistrun ]] && has_tdistrun=1; done
# Nothing of the build or source tree on the path: run from the temporary folder, PYTHONPATH the
# installed package's folder only, no user site, no LD_LIBRARY_PATH.
run_python() {
  (cd "$tmp" && env -u LD_LIBRARY_PATH -u TDIST_RUN_BINARY PYTHONPATH="$py_dir" PYTHONNOUSERSITE=1 \
     PYTHONDONTWRITEBYTECODE=1 timeout 120 "$python" "$@")
}
run_python "$here/check_installed_python.py" "$prefix" "$bindir" "$torch_plugin" "$has_tdistrun" \
  || fail "the installed Python package (see above)"
if [[ $torch_plugin == 1 ]]; then
  step "import tdist.torch says why when the installation lacks the plugin"
  rm -f "$py_dir"/tdist/_tdist_torch.*so
  out=$(run_python -c "import tdist.torch" 2>&1) && fail "import tdist.torch without the plugin succeeded"
  grep -q "this installation lacks it" <<<"$out" && grep -qF "$py_dir/tdist" <<<"$out" \
    || fail "import tdist.torch without the plugin does not say that the installation lacks it: $(tail -n 1 <<<"$out")"
  tail -n 1 <<<"$out"
fi

step "passed"
