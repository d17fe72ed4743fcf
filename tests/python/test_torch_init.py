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
