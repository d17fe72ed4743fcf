"""Run by install_test.sh with PYTHONPATH set to the installed package's folder only:
  check_installed_python.py PREFIX BINDIR PLUGIN(0|1) HAS_TDISTRUN(0|1)
checks that `import tdist` (and, with PLUGIN=1, `import tdist.torch`) loads the installed
package and the installed libtdist, that its build info names the installation (not the build
tree), and that `python3 -m tdist.run` would run the installed tdistrun. Exit 0: passed."""
import os
import sys

prefix, bindir, plugin, has_tdistrun = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
prefix = os.path.realpath(prefix)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def inside(path):
    real = os.path.realpath(path)
    return real == prefix or real.startswith(prefix + os.sep)


import tdist  # noqa: E402
from tdist import _build_info  # noqa: E402
from tdist import run as tdist_run  # noqa: E402

check(inside(tdist.__file__), "tdist comes from %s, not from the installation" % tdist.__file__)


def info(name):
    return getattr(_build_info, name, "(missing)")


check(info("INSTALLED") is True, "_build_info.INSTALLED is %r in the installed package" % (info("INSTALLED"),))
check(info("TDISTRUN_BUILD") == "", "the installed _build_info.TDISTRUN_BUILD names %r" % (info("TDISTRUN_BUILD"),))
for name in ("PREFIX", "TDISTRUN_INSTALL", "BINDIR", "LIBDIR"):
    check(inside(info(name)), "_build_info.%s is %s, outside %s" % (name, info(name), prefix))
check(info("TORCH_PLUGIN") is plugin, "_build_info.TORCH_PLUGIN is %r" % (info("TORCH_PLUGIN"),))
if has_tdistrun:
    os.environ.pop("TDIST_RUN_BINARY", None)
    found = tdist_run._find_tdistrun()
    check(os.path.realpath(found) == os.path.realpath(os.path.join(bindir, "tdistrun")),
          "python3 -m tdist.run would run %s, not the installed %s/tdistrun" % (found, bindir))



def check_plugin():
    import torch
    import torch.distributed as dist
    import tdist.torch  # noqa: F401

    check(inside(tdist._tdist_torch.__file__), "the plugin comes from %s" % tdist._tdist_torch.__file__)
    # One rank over torch's in-process store: the plugin runs a collective through libtdist.
    dist.init_process_group("tdist", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.ones(4)
    dist.all_reduce(t)
    check(t.tolist() == [1.0] * 4, "all_reduce on one rank gave %s" % t.tolist())
    dist.destroy_process_group()


if plugin:
    try:
        check_plugin()
    except Exception as e:  # reported with the other failures
        check(False, "the installed PyTorch plugin: %s: %s" % (type(e).__name__, e))

with open("/proc/self/maps") as maps:
    loaded = {line.split()[-1] for line in maps if "libtdist.so" in line}
check(loaded and all(inside(p) for p in loaded), "libtdist loaded from %s, not from the installation" % sorted(loaded))

if failures:
    for f in failures:
        print("installed python: FAILED: " + f, file=sys.stderr)
    sys.exit(1)
print("installed python OK: tdist from %s%s" % (os.path.dirname(tdist.__file__), ", with the PyTorch plugin" if plugin else ""))
