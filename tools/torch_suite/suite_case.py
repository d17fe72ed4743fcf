"""torch's distributed test suite as one unittest class, for the backend named by $BACKEND.

This is what upstream's test/distributed/test_distributed_spawn.py does (that file is not in
the wheel): `TestDistBackend` (the multi-process harness) mixed with
`DistributedTest._DistTestBase` (the tests). run_distributed_test.py sets the environment and
imports this module; spawned ranks import it again by name, so everything a rank needs (the
plugin's registration, the backend's feature sets) happens here, at import, in every process.

distributed_test.py reads $BACKEND and $WORLD_SIZE when it is imported and decides most skips
then (decorators), so a third-party backend must be registered with torch and declared in
`DistTestCases` before that import. torch's way for a backend it does not know:
`DistTestCases.backend_feature["plugin"]` (require_backend_is_available accepts it), plus the
feature sets the backend really has ("ddp", "subgroup"); the "gpu"/"cuda" sets stay as they
are (tdist serves CPU tensors only), and `DistTestCases.skip_collective` stays empty for it
(tdist has reduce, allgather_coalesced, recv from any source and a CPU barrier).
"""

import os
import unittest

import torch

BACKEND = os.environ["BACKEND"]

if BACKEND == "tdist":
    import tdist.torch  # noqa: F401  registers backend "tdist" with torch.distributed

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Features of CPU backends that torch's own sets grant by name: what tdist offers as Gloo does.
_PLUGIN_FEATURES = ("plugin", "ddp", "subgroup")
if BACKEND not in ("gloo", "nccl", "ucc", "mpi"):
    for feature in _PLUGIN_FEATURES:
        DistTestCases.backend_feature[feature].add(BACKEND)

if os.environ.get("TDIST_SUITE_LIFT_GLOO_CHECKS") == "1":
    # The "gpu" set also gates tests that run on CPU tensors where there is no GPU (object
    # collectives, DDP on CPU): Gloo runs them here, so the plugin should too. Only without a GPU:
    # with one, these tests would hand tdist CUDA tensors.
    if not torch.cuda.is_available():
        DistTestCases.backend_feature["gpu"].add(BACKEND)
    import lift_gloo_checks  # noqa: F401  makes distributed_test's `BACKEND == "gloo"` checks accept this backend

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

torch.backends.cuda.matmul.allow_tf32 = False


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """One test = `WORLD_SIZE` fresh rank processes (spawned, as upstream, or forked)."""

    def setUp(self):
        super().setUp()
        if os.environ.get("TDIST_SUITE_START_METHOD", "spawn") == "fork":
            self._fork_processes()
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    def tearDown(self):
        super().tearDown()
        # MultiProcessTestCase leaves each test's FileStore file (a mkstemp file in /tmp) behind.
        try:
            os.remove(self.file_name)
        except OSError:
            pass

    def _fork_processes(self):
        # Forked ranks skip re-importing torch (seconds each on a small box); the parent has
        # touched no CUDA and run no torch op, so a fork is as clean as a spawn for CPU backends.
        # Upstream had this as test_distributed_fork.py until it dropped it for CUDA's sake.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


def load_tests(loader, standard_tests, pattern):
    return unittest.TestSuite(loader.loadTestsFromTestCase(TestDistBackendWithSpawn))
