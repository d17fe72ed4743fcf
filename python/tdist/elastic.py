"""Error files for launched processes, as torch.distributed.elastic's ``@record``.

tdistrun and torchrun give each worker ``TORCHELASTIC_ERROR_FILE``; an error that ends the
worker is written there in torch's JSON and the launcher's failure summary shows it. Importing
tdist in such a worker installs a ``sys.excepthook`` that does this for any uncaught exception;
``record`` does it for one function (and re-raises), as torch's does.

torch's import paths work too: ``from tdist.elastic.multiprocessing.errors import record,
ChildFailedError`` (the submodules live in the _elastic folder next to this file).
"""
import functools
import json
import os
import sys
import time
import traceback

_ENV = "TORCHELASTIC_ERROR_FILE"

# A module with __path__ is a package to the import system: tdist.elastic.multiprocessing and
# tdist.elastic.multiprocessing.errors are found in this folder, at torch's paths.
__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "_elastic")]


def write_error_file(exc_type, exc, tb):
    """Writes the exception to $TORCHELASTIC_ERROR_FILE (atomically); returns whether it did."""
    path = os.environ.get(_ENV)
    if not path:
        return False
    data = {"message": {"message": f"{exc_type.__name__}: {exc}",
                        "extraInfo": {"py_callstack": "".join(traceback.format_exception(exc_type, exc, tb)),
                                      "timestamp": str(int(time.time()))}}}
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        return True
    except OSError:
        return False


def _copy_child_error_file(failure):
    """ChildFailedError: the root failure's own error file becomes this process's, as torch's
    record does (the child's traceback, not the parent's, reaches the launcher). Returns whether
    it did."""
    path = os.environ.get(_ENV)
    if not path or not os.path.isfile(failure.error_file):
        return False
    try:
        with open(failure.error_file) as f:
            data = json.load(f)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError):
        return False


def record(fn):
    """Decorator: an exception escaping ``fn`` is written to the error file, then re-raised
    (a ChildFailedError: its first failure's error file is copied there)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemExit as e:
            if e.code not in (None, 0):
                write_error_file(type(e), e, e.__traceback__)
            raise
        except BaseException as e:  # noqa: B902  (KeyboardInterrupt too: it ended the worker)
            from .elastic.multiprocessing.errors import ChildFailedError

            if not (isinstance(e, ChildFailedError) and _copy_child_error_file(e.get_first_failure()[1])):
                write_error_file(type(e), e, e.__traceback__)
            raise
    return wrapper


def _install_excepthook():
    if not os.environ.get(_ENV) or getattr(sys.excepthook, "_tdist_error_file", False):
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        write_error_file(exc_type, exc, tb)
        # Ctrl-C reaches every worker of the job: a traceback from each says
        # nothing the user does not know (the error file keeps it).
        if issubclass(exc_type, KeyboardInterrupt):
            return
        previous(exc_type, exc, tb)

    hook._tdist_error_file = True
    sys.excepthook = hook


_install_excepthook()
