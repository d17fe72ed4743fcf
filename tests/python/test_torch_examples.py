"""The tutorial's programs (examples/python/torch_*.py) run on backend "tdist".

Each is run as a user runs it: a script that spawns its ranks with
torch.multiprocessing and meets through env:// (MASTER_PORT given here, free).
"""

import os
import pathlib
import subprocess
import sys

import pytest

import torch_harness

EXAMPLES = pathlib.Path(os.environ.get("TDIST_EXAMPLES_PYTHON",
                                       pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))


def run_example(name, *args):
    """Runs the example; returns its output. One retry if the free port was taken meanwhile."""
    for attempt in range(2):
        env = dict(os.environ, MASTER_PORT=str(torch_harness.free_port()))
        proc = subprocess.run([sys.executable, str(EXAMPLES / name)] + [str(a) for a in args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        if proc.returncode == 0:
            return proc.stdout
        if attempt == 0 and "address already in use" in proc.stdout.lower():
            continue
        pytest.fail("%s %s exited with %d:\n%s" % (name, " ".join(map(str, args)), proc.returncode, proc.stdout))


def test_setup_template():
    out = run_example("torch_setup_template.py", 3)
    for r in range(3):
        assert "Hello from rank %d of 3 (backend tdist)" % r in out, out


def test_p2p_blocking():
    out = run_example("torch_p2p_blocking.py", 2)
    # Ranks print concurrently, so their words may interleave: count the values.
    assert out.count("tensor(1.)") == 2, out


def test_p2p_nonblocking():
    out = run_example("torch_p2p_nonblocking.py", 2)
    assert "Rank 0 started sending" in out and "Rank 1 started receiving" in out, out
    assert out.count("tensor(1.)") == 2, out


def test_group_all_reduce():
    out = run_example("torch_all_reduce.py", 3)  # the group is ranks 0 and 1; rank 2 keeps its 1
    assert out.count("tensor(2.)") == 2 and out.count("tensor(1.)") == 1, out


def test_ring_all_reduce():
    # The example checks its result against dist.all_reduce on every rank.
    out = run_example("torch_ring_all_reduce.py", 3)
    assert out.count("tensor(30.)") == 3, out


def test_distributed_sgd():
    # The example checks that the replicas stay identical and the loss goes down.
    out = run_example("torch_sgd.py", 2, 3)
    assert out.count("replicas identical") == 2, out
