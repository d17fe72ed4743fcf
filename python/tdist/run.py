"""``python3 -m tdist.run [tdistrun options] script.py|-m module|program [args]``: the launcher.

It takes tdistrun's options (torchrun's: --nproc-per-node, --nnodes, --node-rank, --rdzv-backend,
--rdzv-endpoint, --max-restarts, --log-dir, -r/--redirects, -t/--tee, ...; see ``tdistrun --help``)
and execs the tdistrun program of this build or installation. A target ending in ``.py`` or given with ``-m`` runs
under this Python interpreter (unless --no-python), which finds this tdist package.
"""
import os
import shutil
import sys

# tdistrun's options that take a value (abbreviations to a unique prefix are accepted, as there).
_VALUE_OPTIONS = ["nproc-per-node", "nnodes", "node-rank", "master-addr", "master-port", "rdzv-id", "role",
                  "kill-timeout", "rdzv-backend", "rdzv-endpoint", "rdzv-conf", "max-restarts", "monitor-interval",
                  "log-dir", "redirects", "tee", "local-ranks-filter"]
_FLAG_OPTIONS = ["standalone", "use-env", "pass-local-rank", "no-prefix", "no-python", "help", "version"]
# torchrun's short options: -r (--redirects) and -t (--tee), each with a value.
_SHORT_VALUE_OPTIONS = ["-r", "-t"]


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


def _option_name(body):
    """The canonical option for a (possibly abbreviated, underscored) name, or body itself."""
    name = body.replace("_", "-")
    known = _VALUE_OPTIONS + _FLAG_OPTIONS
    if name in known:
        return name
    matches = [k for k in known if k.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def build_command(argv, python=sys.executable):
    """tdistrun's argument list for our argv (without the program name)."""
    options, i, no_python = [], 0, False
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg[:2] in _SHORT_VALUE_OPTIONS:
            options.append(arg)
            if len(arg) == 2 and i + 1 < len(argv):
                i += 1
                options.append(argv[i])
            i += 1
            continue
        if not arg.startswith("--"):
            break
        body, eq, inline = arg[2:].partition("=")
        name = _option_name(body)
        value = None
        if name in _VALUE_OPTIONS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                sys.exit(f"tdist.run: option {arg} needs a value")
        i += 1
        if name == "no-python":
            no_python = True
        options.append(arg)
        if value is not None and not eq:
            options.append(value)
    target = argv[i:]
    if not target:
        return options  # tdistrun reports the missing program (or prints --help/--version)
    if not no_python:
        if target[0] == "-m":
            if len(target) < 2:
                sys.exit("tdist.run: -m needs a module name")
            target = [python, "-m"] + target[1:]
        elif target[0].endswith(".py"):
            target = [python] + target
    return options + ["--"] + target if not target[0].startswith("-") else options + target


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    tdistrun = _find_tdistrun()
    cmd = [tdistrun] + build_command(argv)
    # The workers import this very package, wherever it was found.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH", "")
    if package_parent not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = package_parent + (os.pathsep + path if path else "")
    sys.stdout.flush()
    os.execv(tdistrun, cmd)


if __name__ == "__main__":
    main()
