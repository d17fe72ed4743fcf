#!/usr/bin/env python3
"""A 2-D DeviceMesh with named dimensions on CPU: `init_device_mesh("cpu", (2, 2),
mesh_dim_names=("dp", "tp"))`, its 1-D sub-meshes `mesh["dp"]` and `mesh["tp"]` (one process
group each), the flattened mesh `_flatten()`, and HSDP-style training: `fully_shard` over a 2-D
mesh replicates the model along the first dimension and shards it along the second.

    torchrun --nproc-per-node 4 examples/python/torch2/device_mesh_hsdp.py [gloo|tdist]
    PYTHONPATH=build/python python3 -m tdist.run --nproc-per-node 4 examples/python/torch2/device_mesh_hsdp.py tdist
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import _launch

STEPS = 3


def named_dimensions():
    """Which ranks each named dimension groups together, seen from this rank."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    rank = torch.tensor([float(dist.get_rank())])
    seen = {}
    for name in ("dp", "tp"):
        sub = mesh[name]
        assert sub.size() == 2 and sub.mesh_dim_names == (name,)
        peers = rank.clone()
        dist.all_reduce(peers, group=sub.get_group())  # the sum of the ranks in this rank's group
        seen[name] = (mesh.get_local_rank(name), dist.get_process_group_ranks(sub.get_group()), float(peers))
    if hasattr(mesh, "_flatten"):  # private, in torch 2.4 and later
        flat = mesh._flatten("dp_tp")  # a 1-D mesh (and group) over all four ranks
        everyone = rank.clone()
        dist.all_reduce(everyone, group=flat.get_group())
        seen["dp_tp"] = (flat.get_local_rank(), dist.get_process_group_ranks(flat.get_group()), float(everyone))
    return seen


def batch(rank, step):
    g = torch.Generator().manual_seed(10 * step + rank)
    return torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)


def hsdp_training():
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 3))
    fully_shard(model, mesh=mesh)  # 2-D mesh: HSDP, parameters (Replicate(), Shard(0))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = batch(dist.get_rank(), step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    loss = loss.detach()
    dist.all_reduce(loss)
    params = torch.cat([p.detach().full_tensor().flatten() for p in model.parameters()])
    return loss / dist.get_world_size(), params, model[0].weight.placements


def run():
    seen = named_dimensions()
    loss, params, placements = hsdp_training()
    summary = "device mesh: rank 0 sees dp %s, tp %s, flattened %s; HSDP %s: final loss %.4f, params checksum %.4f" % (
        seen["dp"][1], seen["tp"][1], seen.get("dp_tp", (0, "-"))[1], placements, loss, params.sum())
    return summary, {"seen": str(seen), "loss": loss, "params": params, "placements": str(placements)}


if __name__ == "__main__":
    _launch.main(run)
