"""Helpers of the NumPy module's tests: ranks as forked processes (fast; the test process itself
never initializes tdist, so it has no threads to fork), each failing rank reported with its
traceback by tdist.spawn."""
import os
import sys

import pytest

import tdist

# A deadline for anything a test waits on: generous (the 2-core box may be loaded), but a hang
# turns into an error long before ctest's timeout.
WAIT_S = 60


def run_ranks(fn, nprocs, *args):
    """Runs fn(rank, nprocs, *args) in nprocs forked processes with the env:// variables set."""
    tdist.spawn(_entry, args=(fn, nprocs) + args, nprocs=nprocs, start_method="fork")


def _entry(rank, fn, nprocs, *args):
    fn(rank, nprocs, *args)
    sys.stdout.flush()


def init(**kwargs):
    """init_process_group from the environment spawn set, with a bounded timeout."""
    from datetime import timedelta

    kwargs.setdefault("timeout", timedelta(seconds=WAIT_S))
    tdist.init_process_group("gloo", **kwargs)


@pytest.fixture
def build_dir():
    d = os.environ.get("TDIST_BUILD_DIR")
    if not d:
        d = os.path.join(os.path.dirname(__file__), "..", "..", "build")
    return os.path.abspath(d)
