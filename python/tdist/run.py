"""``python3 -m tdist.run [tdistrun options] script.py|-m module|program [args]``: the launcher.

It takes tdistrun's options (torchrun's: --nproc-per-node, --nnodes, --node-rank, --master-addr,
--master-port, --standalone, ...; see ``tdistrun --help``), plus torchrun's --rdzv-endpoint
HOST:PORT (same as --master-addr/--master-port) and --rdzv-backend (ignored), and execs the
tdistrun program of this build or installation. A target ending in ``.py`` or given with ``-m`` runs
under this Python interpreter (unless --no-python), which finds this tdist package.
"""
import os
import shutil
import sys

# tdistrun's options that take a value (abbreviations to a unique prefix are accepted, as there).
_VALUE_OPTIONS = ["nproc-per-node", "nnodes", "node-rank", "master-addr", "master-port", "rdzv-id", "role",
                  "kill-timeout"]
_FLAG_OPTIONS = ["standalone", "use-env", "pass-local-rank", "no-prefix", "no-python", "help", "version"]
# torchrun's options handled here.
_OWN_VALUE_OPTIONS = ["rdzv-endpoint", "rdzv-backend"]


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
    known = _VALUE_OPTIONS + _FLAG_OPTIONS + _OWN_VALUE_OPTIONS
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
        if not arg.startswith("--"):
            break
        body, eq, inline = arg[2:].partition("=")
        name = _option_name(body)
        value = None
        if name in _VALUE_OPTIONS or name in _OWN_VALUE_OPTIONS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                sys.exit(f"tdist.run: option {arg} needs a value")
        i += 1
        if name == "rdzv-endpoint":
            host, _, port = value.rpartition(":")
            if not host:
                host, port = port, "29400"  # torchrun's default rendezvous port
            options += ["--master-addr", host, "--master-port", port]
        elif name == "rdzv-backend":
            pass  # a static rendezvous through rank 0's TCPStore: any backend name means that here
        else:
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
