"""DistributedDataParallel trains the same model to the same parameters on "tdist" as on "gloo".

Each rank trains three copies of a small network from the same (per-rank
different, so DDP's initial broadcast matters) initial weights on the same
data shards: with DDP over the default "tdist" group, over "tdist" with a
Python comm hook (futures of all_reduce), and over a Gloo group. Small
buckets put several all_reduces in flight at once; BatchNorm's buffers make
DDP broadcast every step.
"""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import torch_harness

STEPS = 6


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                         nn.Linear(16, 5))


def shard(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)


def train(rank, group, hook):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = make_model(seed=100 + rank)
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.002)  # ~2 KB buckets: several per step
    if hook:
        ddp.register_comm_hook(group, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = shard(rank, step)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    # Parameters, then buffers (these differ between ranks: each forward
    # updates BatchNorm's running stats locally after DDP broadcast rank 0's).
    return [t.detach().clone() for t in list(model.parameters()) + list(model.buffers())]


def ddp_matches_gloo(rank, world):
    gloo = dist.new_group(backend="gloo")
    tdist_params = train(rank, None, hook=False)
    hooked_params = train(rank, None, hook=True)
    gloo_params = train(rank, gloo, hook=False)
    for i, (t, h, g) in enumerate(zip(tdist_params, hooked_params, gloo_params)):
        assert torch.allclose(t.double(), g.double(), rtol=1e-5, atol=1e-6), \
            "rank %d: tensor %d after %d steps: tdist %s vs gloo %s" % (rank, i, STEPS, t, g)
        assert torch.allclose(h.double(), g.double(), rtol=1e-5, atol=1e-6), \
            "rank %d: tensor %d (comm hook): tdist %s vs gloo %s" % (rank, i, h, g)
    # The replicas' parameters agree across ranks (compared through Gloo, independent of the plugin).
    n_params = len(list(make_model(0).parameters()))
    flat = torch.cat([t.flatten().double() for t in tdist_params[:n_params]])
    everyone = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat, group=gloo)
    for r in range(world):
        assert torch.allclose(everyone[r], flat, rtol=1e-6, atol=1e-7), "rank %d's replica differs from rank %d's" % (
            r, rank)
    # Training moved the weights away from rank 0's initial ones.
    assert not torch.allclose(tdist_params[0], make_model(100)[0].weight)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_trains_like_gloo(world):
    torch_harness.run_ranks(ddp_matches_gloo, world)
