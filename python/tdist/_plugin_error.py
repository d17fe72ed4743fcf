"""Why ``import tdist.torch`` could not load the extension tdist._tdist_torch, in one message.

The extension can be absent (this build left it out, or an installation lacks it) or present and
failing to load (a library it needs is not found, or it was built against another torch); each
calls for a different fix, so the message names the case, the file or folder, and the fix.
"""
import glob
import importlib.machinery
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _extension_files():
    found = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found += glob.glob(os.path.join(_HERE, "_tdist_torch" + suffix))
    return sorted(set(found))


def _build_info():
    try:
        from . import _build_info
        return _build_info
    except ImportError:
        return None


def _absent():
    info = _build_info()
    if info is not None and getattr(info, "WHEEL", False) and getattr(info, "TORCH_PLUGIN", None) is False:
        return ("this package was installed from a wheel built without the plugin: its build saw no torch "
                "2.x (pip builds in an isolated environment, which has no torch); in the venv that has torch, "
                "install scikit-build-core and pybind11, then `pip install --no-build-isolation <tdist source "
                "folder>` (docs/install.md)")
    if info is not None and getattr(info, "TORCH_PLUGIN", None) is False:
        return ("the build this package comes from left the plugin out: CMake found no torch 2.x when it "
                "configured (its output has a line 'PyTorch plugin: not built (...)' saying why); make a "
                "venv with torch 2.x (scripts/torch_venv.sh prints its python), configure again with "
                "-DTDIST_TORCH_PYTHON=<that python>, build and install, and run the program with that python")
    if info is not None and getattr(info, "INSTALLED", False):
        return ("this installation lacks it although its build made it (cmake --install left it out "
                "before): install again with `cmake --install BUILD_DIR --prefix %s`" % info.PREFIX)
    if info is not None and getattr(info, "TORCH_PLUGIN", None):
        return "the build configured it but has not built it yet: cmake --build BUILD_DIR --target _tdist_torch"
    return ("it is built by the project's CMake for the torch 2.x of the interpreter -DTDIST_TORCH_PYTHON names "
            "(scripts/torch_venv.sh makes such a venv; scripts/test.sh passes it)")


def _does_not_load(path, error):
    text = str(error)
    if "libtdist" in text:
        hint = ("it does not find the tdist library: it looks for it through its RPATH (relative to its "
                "own folder once installed), so keep the package and the library of one installation "
                "together, or set LD_LIBRARY_PATH to the folder of libtdist.so.0")
    elif "undefined symbol" in text or "libtorch" in text or "libc10" in text:
        import torch
        hint = ("it was built against another torch than this interpreter's (torch %s from %s): build it "
                "again against this one" % (torch.__version__, os.path.dirname(torch.__file__)))
    else:
        hint = "see the loader's message above"
    return "%s does not load: %s; %s" % (path, text, hint)


def explain(error):
    """The message of the ImportError that ``import tdist.torch`` raises for `error`."""
    files = _extension_files()
    if not files:
        why = "there is no %s in %s: %s" % ("_tdist_torch" + importlib.machinery.EXTENSION_SUFFIXES[0],
                                             _HERE, _absent())
    else:
        why = _does_not_load(files[0], error)
    return "tdist.torch: the PyTorch plugin (extension tdist._tdist_torch) is not available: " + why
