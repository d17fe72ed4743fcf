#!/usr/bin/env python3
"""Distributed checkpoint (torch.distributed.checkpoint) with resharding: 4 ranks save a state
dict whose tensors are sharded over them (DTensors, one replicated), then 2 of the ranks load it
into tensors sharded another way over a 2-rank mesh, and get the original values.

Run on 4 ranks. The checkpoint goes to a directory that every rank can reach (the first argument
after the backend; else a temporary one made by rank 0, removed at the end).

    torchrun --nproc-per-node 4 examples/python/torch2/dcp_reshard.py [gloo|tdist] [directory]
    PYTHONPATH=build/python python3 -m tdist.run --nproc-per-node 4 examples/python/torch2/dcp_reshard.py tdist
"""
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import _launch


def originals():
    torch.manual_seed(3)  # the same full tensors on every rank
    return {"embed": torch.randn(12, 6), "proj": torch.randn(6, 10), "scale": torch.randn(10)}


def temporary_dir():
    """A directory made by rank 0, its name sent to the others."""
    made = [tempfile.mkdtemp(prefix="dcp_reshard_") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(made, src=0)
    return made[0]


def run(path=None):
    assert dist.get_world_size() == 4, "run this on 4 ranks"
    temporary = path is None
    if temporary:
        path = temporary_dir()
    full = originals()

    mesh4 = init_device_mesh("cpu", (4,))
    saved = {"embed": distribute_tensor(full["embed"], mesh4, [Shard(0)]),
             "proj": distribute_tensor(full["proj"], mesh4, [Shard(1)]),
             "scale": distribute_tensor(full["scale"], mesh4, [Replicate()])}
    dcp.save(saved, checkpoint_id=path)

    # Every rank makes the 2-rank mesh (new_group is collective); ranks 0 and 1 load into it,
    # sharded along other dimensions than in the checkpoint.
    mesh2 = DeviceMesh("cpu", [0, 1])
    results = {}
    if dist.get_rank() < 2:
        loaded = {"embed": distribute_tensor(torch.zeros(12, 6), mesh2, [Shard(1)]),
                  "proj": distribute_tensor(torch.zeros(6, 10), mesh2, [Shard(0)]),
                  "scale": distribute_tensor(torch.zeros(10), mesh2, [Shard(0)])}
        dcp.load(loaded, checkpoint_id=path, process_group=mesh2.get_group())
        for name, t in loaded.items():
            results[name + "_local"] = t.to_local().clone()
            results[name] = t.full_tensor()
            assert torch.equal(results[name], full[name]), "%s differs after loading" % name
    dist.barrier()
    if temporary and dist.get_rank() == 0:
        shutil.rmtree(path)
    checksum = sum(float(t.sum()) for t in full.values())
    summary = "dcp: saved on 4 ranks, loaded on 2 with other shardings, %d tensors equal (checksum %.4f)" % (
        len(full), checksum)
    return summary, results


if __name__ == "__main__":
    _launch.main(run)
