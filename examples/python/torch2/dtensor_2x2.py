#!/usr/bin/env python3
"""DTensor on a 2x2 DeviceMesh: `distribute_tensor` with Shard and Replicate placements,
`redistribute` between them, and a matmul of two distributed matrices, checked against the same
matmul on full tensors.

The matrices hold small integers, so every product and sum is exact in float32: the result does
not depend on the order in which a backend adds the partial sums.

    torchrun --nproc-per-node 4 examples/python/torch2/dtensor_2x2.py [gloo|tdist]
    PYTHONPATH=build/python python3 -m tdist.run --nproc-per-node 4 examples/python/torch2/dtensor_2x2.py tdist
"""
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import _launch


def run():
    mesh = init_device_mesh("cpu", (2, 2))
    torch.manual_seed(0)  # the same full matrices on every rank
    a = torch.randint(-4, 5, (8, 6)).float()
    b = torch.randint(-4, 5, (6, 4)).float()

    # Rows of a split over mesh dimension 0, replicated over dimension 1; b's columns split over 1.
    da = distribute_tensor(a, mesh, [Shard(0), Replicate()])
    db = distribute_tensor(b, mesh, [Replicate(), Shard(1)])
    row_col = da @ db  # each rank multiplies its rows by its columns: no communication
    # Split the inner dimension over mesh dimension 1: a's columns (a local slice of the replica),
    # b's rows (Shard(1) -> Shard(0), an all-to-all, which torch does as all_gather + chunk on a
    # CPU mesh). Each rank then holds a partial product; redistribute sums them (all_reduce).
    da_k = da.redistribute(mesh, [Shard(0), Shard(1)])
    db_k = db.redistribute(mesh, [Replicate(), Shard(0)])
    partial = da_k @ db_k
    summed = partial.redistribute(mesh, [Shard(0), Replicate()])

    results = {
        "local_a": da.to_local().clone(), "local_a_k": da_k.to_local().clone(),
        "row_col": row_col.full_tensor(), "summed": summed.full_tensor(),
        "placements": str((row_col.placements, partial.placements, summed.placements)),
    }
    expected = a @ b
    assert torch.equal(results["row_col"], expected) and torch.equal(results["summed"], expected)
    summary = "dtensor: 2x2 mesh, (8x6)@(6x4) as %s and via %s -> %s, equal to the local matmul, checksum %.0f" % (
        row_col.placements, partial.placements, summed.placements, expected.sum())
    return summary, results


if __name__ == "__main__":
    _launch.main(run)
