"""``python3 -m tdist.run [tdistrun options] script.py|-m module|--no-python program [args]``: the launcher.

``python -m torch.distributed.run`` for tdist: it execs the tdistrun program of this build or
installation with the same arguments (torchrun's options; see ``tdistrun --help``). tdistrun runs the
script or module with this Python interpreter (PYTHON_EXEC), which finds this tdist package;
``--no-python`` executes a program directly.
"""
import os
import shutil
import sys


def _find_tdistrun():
    """The tdistrun program: $TDIST_RUN_BINARY, this build's, the installed one, or PATH's."""
    candidates = [os.environ.get("TDIST_RUN_BINARY", "")]
    try:
        from . import _build_info

        candidates += [_build_info.TDISTRUN_BUILD, _build_info.TDISTRUN_INSTALL]
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("tdistrun")
    if found:
        return found
    sys.exit("tdist.run: cannot find the tdistrun program (build it with the project's CMake, or set "
             "TDIST_RUN_BINARY); looked at: " + ", ".join(c for c in candidates if c) + " and PATH")


def launch_environment(environ, python=sys.executable):
    """tdistrun's environment: ``environ`` with PYTHON_EXEC set to this interpreter unless it is set
    (tdistrun, as torchrun, runs a script or ``-m`` module with PYTHON_EXEC), and PYTHONPATH starting
    with the folder of this tdist package, so that the workers import it wherever it was found."""
    env = dict(environ)
    if not env.get("PYTHON_EXEC"):
        env["PYTHON_EXEC"] = python
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = env.get("PYTHONPATH", "")
    if package_parent not in path.split(os.pathsep):
        env["PYTHONPATH"] = package_parent + (os.pathsep + path if path else "")
    return env


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    tdistrun = _find_tdistrun()
    sys.stdout.flush()
    os.execve(tdistrun, [tdistrun] + list(argv), launch_environment(os.environ))


if __name__ == "__main__":
    main()
