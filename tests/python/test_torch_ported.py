"""Programs written as torch.distributed programs are, ported by changing their imports to tdist
(tests/ported/), each run under tdistrun with 2 or 3 ranks as a user runs it; each checks its own
results and exits non-zero when one is wrong. Plus the names whose answers must equal torch's."""
import os
import pathlib
import subprocess
import sys
from datetime import timedelta

import pytest
import torch.distributed

import tdist

PORTED = pathlib.Path(__file__).resolve().parents[1] / "ported"


def tdistrun(nproc, program, *args):
    cmd = [sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", str(nproc), str(PORTED / program)]
    return subprocess.run(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


@pytest.mark.parametrize("program,nproc,done", [("collectives.py", 3, "collectives ok"),
                                                 ("objects_and_groups.py", 3, "objects and groups ok"),
                                                 ("mesh_and_record.py", 2, "mesh ok")])
def test_ported_program(program, nproc, done):
    r = tdistrun(nproc, program)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(nproc):
        assert f"rank {rank}: {done}" in r.stdout, r.stdout + r.stderr


def test_ported_program_failure_reaches_the_launcher_through_record():
    r = tdistrun(2, "mesh_and_record.py", "--fail-on-rank", "1")
    assert r.returncode != 0
    assert "ValueError: planned failure on rank 1" in r.stderr, r.stderr


def test_distributed_c10d_names_are_torchs():
    # The list tdist.distributed_c10d checks is torch 2.15's __all__, less the backend classes torch
    # adds to it where they are built (ProcessGroupGloo, ProcessGroupNCCL, ...). An older torch
    # (2.11 on the lent GPU machine) lacks the names added since: the list is then only checked to
    # hold every name of that torch.
    torch_names = set(torch.distributed.distributed_c10d.__all__)
    ours = set(tdist.distributed_c10d._TORCH_NAMES)
    assert all(n.startswith("ProcessGroup") for n in torch_names - ours)
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 15):
        return
    assert ours <= torch_names
    for name in tdist.distributed_c10d.__all__:
        assert hasattr(torch.distributed, name) or hasattr(torch.distributed.distributed_c10d, name), name


def test_answers_equal_torchs():
    for device in ("cpu", "cuda", "cuda:1", "xpu", "mps"):
        assert tdist.get_default_backend_for_device(device) == torch.distributed.get_default_backend_for_device(device)
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        assert tdist.supports_complex(getattr(tdist.ReduceOp, op)) == \
            torch.distributed.supports_complex(getattr(torch.distributed.ReduceOp, op)), op
    assert tdist.is_ucc_available() == torch.distributed.is_ucc_available()
    assert tdist.is_backend_available("gloo") == torch.distributed.is_backend_available("gloo")
    assert tdist.is_backend_available("no_such") == torch.distributed.is_backend_available("no_such")


@pytest.mark.parametrize("world_size,wait_for_workers", [(None, False), (1, True)])
def test_num_keys_counts_as_torchs(world_size, wait_for_workers):
    # The same operations on torch's TCPStore and on tdist's count the same keys (torch counts its
    # "init/" key of wait_for_workers, not in list_keys).
    stores = [m.TCPStore("127.0.0.1", 0, world_size, True, timedelta(seconds=30), wait_for_workers=wait_for_workers)
              for m in (torch.distributed, tdist)]
    t, d = stores
    assert d.num_keys() == t.num_keys()
    for s in stores:
        s.set("a", "1")
        s.add("b", 1)
        s.compare_set("c", "", "x")
        s.delete_key("a")
    assert d.num_keys() == t.num_keys()
    assert sorted(d.list_keys()) == sorted(t.list_keys()) == ["b", "c"]
