#!/usr/bin/env bash
# Makes (or brings up to date) the virtual environment with the newest torch 2.x from the Python
# package index that the PyTorch plugin is built for and tested with; prints its interpreter's
# path as the last line. scripts/test.sh runs it and passes that path to CMake
# (-DTDIST_TORCH_PYTHON=...).
#
#   scripts/torch_venv.sh            the venv, with the newest torch 2.x
#   TDIST_TORCH_SPEC='torch==2.15.0' scripts/torch_venv.sh    a given version instead
#
# The venv is made with --system-site-packages on Debian's /usr/bin/python3 (python3-venv): it
# sees Debian's NumPy and pytest, and the tdist module built for that interpreter loads in it.
# torch's wheel and the CUDA libraries it depends on are about 2.8 GB, and pip's own cache keeps
# nothing from this index (its answers are not cacheable): the wheels are kept in a wheelhouse
# instead, so a second run on the same machine downloads nothing and finds torch installed.
#
# Environment: TDIST_TORCH_VENV (default ~/.cache/tdist/venv-torch), TDIST_WHEELHOUSE (default
# ~/.cache/tdist/wheels), TDIST_TORCH_SPEC (default 'torch>=2,<3').
set -euo pipefail

venv=${TDIST_TORCH_VENV:-$HOME/.cache/tdist/venv-torch}
wheels=${TDIST_WHEELHOUSE:-$HOME/.cache/tdist/wheels}
spec=${TDIST_TORCH_SPEC:-torch>=2,<3}
start=$SECONDS
# Beside torch: expecttest, which torch's own distributed test suite imports
# (tests/python/test_torch_suite.py) and torch's wheel does not depend on.
extras=(expecttest)

say() { printf 'torch_venv: %s\n' "$*" >&2; }

if [[ ! -x $venv/bin/python ]]; then
  say "making $venv (--system-site-packages on /usr/bin/python3)"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# Resolves the newest matching torch on the index and fetches only what the wheelhouse lacks.
# Without the index (offline), what the wheelhouse holds is used.
mkdir -p "$wheels"
if ! "${pip[@]}" download -q --dest "$wheels" "$spec" "${extras[@]}" >&2; then
  say "could not reach the package index; using the wheelhouse ($wheels) as it is"
fi
# The newest torch the wheelhouse holds that matches (pip does nothing when it is installed).
"${pip[@]}" install -q --no-index --find-links "$wheels" --upgrade --upgrade-strategy only-if-needed "$spec" "${extras[@]}" >&2
say "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv ($((SECONDS - start)) s)"
echo "$venv/bin/python"
