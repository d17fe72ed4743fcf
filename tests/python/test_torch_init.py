"""init_process_group("tdist") with every init method torch has: env://, tcp://, file://, store=."""

import pytest
import torch
import torch.distributed as dist

import torch_harness


def sum_ranks(rank, world):
    assert dist.get_backend() == "tdist" and dist.get_rank() == rank and dist.get_world_size() == world
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    assert t.item() == world * (world - 1) / 2, t
    # A subgroup's store is torch's PrefixStore over the same store.
    sub = dist.new_group(list(range(world)), backend="tdist")
    dist.all_reduce(t, group=sub)
    assert t.item() == world * world * (world - 1) / 2, t
    dist.barrier()


@pytest.mark.parametrize("init", ["env", "tcp", "file", "store"])
def test_init_method(init):
    torch_harness.run_ranks(sum_ranks, 3, init=init)


def test_import_registers_once():
    import importlib

    import tdist.torch

    importlib.reload(tdist.torch)  # a second registration would raise in torch
    assert dist.Backend("tdist") == "tdist"
    assert "TDIST" in dist.Backend._plugins


def test_torch_program_under_tdistrun(tmp_path):
    # tdistrun's store speaks tdist's protocol; once tdist.torch is imported, torch's env:// uses it
    # for every backend (tdist and gloo), so torch programs run under tdistrun as under torchrun.
    import os
    import subprocess
    import sys

    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist\n"
        "import tdist.torch\n"
        "dist.init_process_group(sys.argv[1])\n"
        "t = torch.ones(2) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(t)\n"
        "assert t.tolist() == [6.0, 6.0], t\n"
        "sub = dist.new_group([0, 2])\n"
        "if dist.get_rank() in (0, 2):\n"
        "    dist.all_reduce(t, group=sub)\n"
        "    assert t.tolist() == [12.0, 12.0], t\n"
        "dist.barrier()\n"
        "print('ok', dist.get_backend(), dist.get_rank(), flush=True)\n"
        "dist.destroy_process_group()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    for backend in ("tdist", "gloo"):
        r = subprocess.run([sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", "3", str(script),
                            backend], cwd=root, env=env, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        for rank in range(3):
            assert f"[rank{rank}]: ok {backend} {rank}" in r.stdout, r.stdout
