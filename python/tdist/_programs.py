"""The commands ``tdistrun`` and ``tdist-trace`` of a pip-installed tdist.

pip puts these console commands (``[project.scripts]`` in pyproject.toml) on the venv's PATH;
each one replaces itself (exec) with the program the wheel carries in tdist/bin, so the running
process is the program itself: its pid, the signals it gets and its exit status are the
program's, as if the program were on PATH. A wheel cannot put the programs there directly and
keep them finding libtdist, whose place relative to the venv's bin folder differs between
installation schemes (venv, --user, --prefix, --target).
"""
import os
import sys


def _exec(name):
    from . import _build_info

    path = os.path.join(_build_info.BINDIR, name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        sys.exit("%s: this installation of tdist (%s) lacks the program %s: install the package again "
                 "(pip install --force-reinstall ...)" % (name, os.path.dirname(os.path.abspath(__file__)), path))
    # torchrun runs a Python script with the interpreter it runs under unless PYTHON_EXEC names
    # another; under this command that interpreter is the one the package is installed for.
    os.environ.setdefault("PYTHON_EXEC", sys.executable)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name] + sys.argv[1:])


def tdistrun():
    _exec("tdistrun")


def tdist_trace():
    _exec("tdist-trace")
