#!/usr/bin/env python3
"""DistributedDataParallel on CPU over the tdist backend that keeps training when a rank dies.

When a step's all-reduce fails, the survivors ask tdist.torch.failed_ranks() (the same answer on
every survivor), call torch.distributed.shrink_group() with it (the default group is replaced by
one of the survivors: no restart), wrap the model in a new DDP (which broadcasts the new rank 0's
weights, so a step some survivors finished and others did not is undone), and redo the step. At
the end every survivor checks that its weights equal rank 0's and prints their digest.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=4 RANK=<r> \\
        python examples/python/torch2/ddp_survives.py --kill-rank 2 --kill-step 7

(one process per rank; torch's env:// store lives in rank 0's process, so rank 0 must survive).
"""
import argparse
import hashlib
import os
import signal

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import tdist.torch  # noqa: F401  (registers the "tdist" backend)
from tdist.torch import failed_ranks


def batch(step, rank, size):
    """This rank's share of the step's 48 samples, re-cut whenever the world changes."""
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(48, 10, generator=g), torch.randint(0, 4, (48,), generator=g)
    return x[rank::size], y[rank::size]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-step", type=int, default=-1)
    args = ap.parse_args()
    dist.init_process_group("tdist")
    launch_rank = dist.get_rank()
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    ddp = DDP(model, bucket_cap_mb=0.001)  # several buckets: the kill can land between two all-reduces
    recoveries = 0
    step = 0
    while step < args.steps:
        x, y = batch(step, dist.get_rank(), dist.get_world_size())
        for p in model.parameters():
            p.grad = None
        try:
            if launch_rank == args.kill_rank and step == args.kill_step:
                os.kill(os.getpid(), signal.SIGKILL)
            # The loss is summed and divided by the whole batch: uneven shares give the batch mean.
            loss = F.cross_entropy(ddp(x), y, reduction="sum") / 48 * dist.get_world_size()
            loss.backward()
        except RuntimeError as e:  # torch.distributed.DistError and what DDP's reducer re-raises
            dead = failed_ranks()
            print(f"[launch rank {launch_rank}] step {step}: {type(e).__name__}; ranks {dead} failed; shrinking",
                  flush=True)
            dist.shrink_group(dead)
            ddp = DDP(model, bucket_cap_mb=0.001)  # broadcasts the new rank 0's weights
            recoveries += 1
            continue
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        step += 1
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    same = torch.tensor([1 if torch.equal(flat, reference) else 0])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
    print(f"[launch rank {launch_rank}] done: rank {dist.get_rank()} of {dist.get_world_size()}, "
          f"{recoveries} recoveries, weights identical: {'yes' if same.item() else 'no'}, digest {digest}",
          flush=True)
    dist.destroy_process_group()
    if not same.item():
        raise SystemExit(1)


if __name__ == "__main__":
    main()
