#!/usr/bin/env python3
"""DistributedDataParallel with a communication hook: torch's `allreduce_hook` (the gradients
averaged in float32, as DDP does without a hook) and `bf16_compress_hook` (the gradients cast to
bfloat16, averaged, cast back: half the bytes on the wire, 8 significant bits).

    torchrun --nproc-per-node 4 examples/python/torch2/ddp_comm_hooks.py [gloo|tdist]
    PYTHONPATH=build/python python3 -m tdist.run --nproc-per-node 4 examples/python/torch2/ddp_comm_hooks.py tdist
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import _launch

STEPS = 5


def batch(rank, step):
    """This rank's share of the step's data: every rank trains on different samples."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 10, generator=g), torch.randint(0, 4, (16,), generator=g)


def train(hook):
    rank = dist.get_rank()
    torch.manual_seed(7 + rank)  # different initial weights: DDP broadcasts rank 0's
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    # Small buckets: several all_reduces (hook calls) per step.
    ddp = DDP(model, bucket_cap_mb=0.001)
    ddp.register_comm_hook(dist.group.WORLD, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.2)
    for step in range(STEPS):
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
    # The loss of the last step, averaged over the ranks, and the weights (the same on every rank).
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss)
    mean_loss /= dist.get_world_size()
    return mean_loss, torch.cat([p.detach().flatten() for p in model.parameters()])


def run():
    results = {}
    for name, hook in [("allreduce", default_hooks.allreduce_hook), ("bf16", default_hooks.bf16_compress_hook)]:
        results[name + "_loss"], results[name + "_params"] = train(hook)
    summary = "ddp: final loss %.4f (allreduce_hook), %.4f (bf16_compress_hook), params checksum %.4f" % (
        results["allreduce_loss"], results["bf16_loss"], results["allreduce_params"].sum())
    return summary, results


if __name__ == "__main__":
    _launch.main(run)
