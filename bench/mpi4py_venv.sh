#!/usr/bin/env bash
# Makes (once) the Python that bench/python_overhead.py runs its MPI ranks with: a venv of Debian's
# Python (its NumPy through --system-site-packages) with mpi4py from the package index, which runs
# on Debian's Open MPI (libopenmpi-dev, openmpi-bin). CI never needs it. Prints the venv's python.
#   bash bench/mpi4py_venv.sh [VENV_DIR]      (default /root/.cache/tdist/venv-mpi4py)
set -euo pipefail
venv=${1:-/root/.cache/tdist/venv-mpi4py}
if ! "$venv/bin/python" -c 'import mpi4py.MPI, numpy' 2>/dev/null; then
  command -v mpicc >/dev/null || { echo "mpicc not found: apt-get install libopenmpi-dev openmpi-bin" >&2; exit 1; }
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet mpi4py  # pip's cache is kept: a second venv downloads nothing
fi
"$venv/bin/python" -c 'from mpi4py import MPI; print(MPI.Get_library_version().strip())' >&2
echo "$venv/bin/python"
