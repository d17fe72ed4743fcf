"""Loads torch's distributed_test.py with its hard-coded Gloo checks widened to this backend.

distributed_test.py names Gloo where it means "a CPU backend with Gloo's features": skip
decorators such as `BACKEND != "gloo"` ("Only gloo backend supports timeouts") and
`require_backend_is_available({"gloo"})` (gather/scatter of objects, coalesced and CPU-only
tests), and all_to_all on CPU as MPI's only (`BACKEND != "mpi"`), which no DistTestCases set
can open for a third-party backend. With
--lift-gloo-checks, this module compiles the wheel's file with those checks rewritten to
`BACKEND in _GLOO_LIKE` (Gloo and $BACKEND) and registers it under its own name before
suite_case imports it, so the tests run on the plugin unchanged otherwise. The profiling
tests' lists of backends whose ops appear in the profiler get $BACKEND too (the plugin records
spans named as Gloo's are). Nothing else of the file changes; the rewrite counts are printed.
Without the flag the suite runs as torch ships it, and those tests are skipped on "tdist".
"""

import importlib.util
import os
import re
import sys

MODULE = "torch.testing._internal.distributed.distributed_test"

# (pattern, replacement): each a whole check on BACKEND, so no other text can match.
REWRITES = (
    (r'BACKEND == "gloo"', "(BACKEND in _GLOO_LIKE)"),
    (r'BACKEND != "gloo"', "(BACKEND not in _GLOO_LIKE)"),
    (r'require_backend_is_available\(\{"gloo"\}\)', "require_backend_is_available(_GLOO_LIKE)"),
    (r'(\nPROFILING_SUPPORTED_BACKENDS = \[\n)', r"\1    os.environ['BACKEND'],\n"),
    (r'(\nSEND_RECV_PROFILING_SUPPORTED_BACKENDS = \[\n)', r"\1    os.environ['BACKEND'],\n"),
    # all_to_all on CPU is tested on MPI only ("Only MPI supports all_to_all"); Gloo and tdist
    # have it too (alltoall_base with splits).
    (r'BACKEND != "mpi", ("Only MPI supports (?:CPU )?all_to_all)', r"BACKEND not in _CPU_ALL_TO_ALL, \1"),
)


def load():
    spec = importlib.util.find_spec(MODULE)
    with open(spec.origin) as f:
        source = f.read()
    counts = []
    for pattern, replacement in REWRITES:
        source, n = re.subn(pattern, replacement, source)
        counts.append((pattern, n))
    # _GLOO_LIKE must exist before the first decorator runs: right after BACKEND is read.
    source, n = re.subn(r'(\nBACKEND = os.environ\["BACKEND"\]\n)',
                        r'\1_GLOO_LIKE = {"gloo", BACKEND}\n_CPU_ALL_TO_ALL = {"mpi", BACKEND}\n', source)
    if n != 1:
        raise RuntimeError("lift_gloo_checks: distributed_test.py no longer reads BACKEND as expected")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    if os.environ.get("TDIST_SUITE_QUIET_LIFT") != "1":
        print("lift_gloo_checks: " + ", ".join("%s x%d" % (p, n) for p, n in counts), file=sys.stderr)
        os.environ["TDIST_SUITE_QUIET_LIFT"] = "1"  # once, not again in every rank
    return module


load()
