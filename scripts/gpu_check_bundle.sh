#!/usr/bin/env bash
# Gathers into .gpu_check/ (git-ignored) what a lent GPU machine may lack to build and test
# tdist, and which it cannot fetch (it has no package registry): the `run` tool carries the
# folder there (carry: [".gpu_check"]) and scripts/gpu_check.sh uses each piece only where the
# machine has none of its own. Run it here, on a machine with the Debian packages:
#   googletest/          GoogleTest's source (libgtest-dev's /usr/src/googletest), built by
#                        tests/CMakeLists.txt when find_package(GTest) fails (-DTDIST_GTEST_SOURCE)
#   include/dlpack/      DLPack's header (libdlpack-dev)
#   openssl/             OpenSSL's headers and libcrypto (libssl-dev), for -DOPENSSL_ROOT_DIR
#   pybind11/            pybind11's headers and CMake package (pybind11-dev), for -Dpybind11_DIR
#   python/include/      Python.h of Debian's python3 (python3-dev), used only for a
#                        Python of the same version
#   pylib/               pytest and what it imports (pure Python), put on PYTHONPATH where the
#                        torch Python has no pytest
# Prints the folder's size; the run tool carries at most 64 MiB.
# usage: scripts/gpu_check_bundle.sh [DEST]   (DEST defaults to .gpu_check in the repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.gpu_check}
rm -rf "$dest"
mkdir -p "$dest"

missing=()
copy_dir() {  # SRC DST: a folder, or a line saying it is not there
  if [ -d "$1" ]; then
    mkdir -p "$(dirname "$2")"
    cp -a "$1" "$2"
  else
    missing+=("$1")
  fi
}

copy_dir /usr/src/googletest "$dest/googletest"
copy_dir /usr/include/dlpack "$dest/include/dlpack"

copy_dir /usr/include/openssl "$dest/openssl/include/openssl"
# The architecture's own opensslconf.h/configuration.h live under the multiarch folder.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
if [ -d "/usr/include/$multiarch/openssl" ]; then
  cp -a "/usr/include/$multiarch/openssl/." "$dest/openssl/include/openssl/"
fi
crypto=$(readlink -f "/usr/lib/$multiarch/libcrypto.so" 2>/dev/null || true)
if [ -n "$crypto" ] && [ -f "$crypto" ]; then
  mkdir -p "$dest/openssl/lib"
  cp "$crypto" "$dest/openssl/lib/"
  ln -sf "$(basename "$crypto")" "$dest/openssl/lib/libcrypto.so"
else
  missing+=("/usr/lib/$multiarch/libcrypto.so")
fi

# pybind11Config.cmake finds its headers at ../../../include from its own folder.
copy_dir /usr/include/pybind11 "$dest/pybind11/include/pybind11"
for d in /usr/lib/cmake/pybind11 /usr/share/cmake/pybind11; do
  if [ -d "$d" ]; then
    copy_dir "$d" "$dest/pybind11/lib/cmake/pybind11"
    break
  fi
done

# Debian's python3 (python3-dev's headers, python3-pytest), not another python3 earlier on PATH.
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
copy_dir "/usr/include/python$pyver" "$dest/python/include/python$pyver"
if [ -d "/usr/include/$multiarch/python$pyver" ]; then
  mkdir -p "$dest/python/include/$multiarch"
  cp -a "/usr/include/$multiarch/python$pyver" "$dest/python/include/$multiarch/"
fi
echo "$pyver" >"$dest/python/VERSION"

# pytest and its imports, from the Python that has them here (pure Python, no compiled parts).
"$py" - "$dest/pylib" <<'EOF'
import importlib, os, shutil, sys
dest = sys.argv[1]
os.makedirs(dest, exist_ok=True)
for name in ["pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "exceptiongroup", "tomli", "attr", "attrs"]:
    try:
        mod = importlib.import_module(name)
    except ImportError:
        continue
    path = mod.__file__
    if os.path.basename(path) == "__init__.py":
        shutil.copytree(os.path.dirname(path), os.path.join(dest, name),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        shutil.copy(path, dest)
EOF

cat >"$dest/README" <<EOF
Made by scripts/gpu_check_bundle.sh on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ) for
scripts/gpu_check.sh on a lent GPU machine (carried by the run tool). Python headers: $pyver.
EOF

size_kib=$(du -sk "$dest" | cut -f1)
echo "gpu_check_bundle: $dest: $((size_kib / 1024)) MiB ($size_kib KiB)"
for m in "${missing[@]+"${missing[@]}"}"; do
  echo "gpu_check_bundle: not found here, left out: $m"
done
if [ "$size_kib" -ge $((64 * 1024)) ]; then
  echo "gpu_check_bundle: over the 64 MiB the run tool carries" >&2
  exit 1
fi
