#!/usr/bin/env python3
"""All-Reduce 示例: a group of ranks 0 and 1 sums an array of ones.

Every rank creates the group (new_group is collective over the world); ranks outside it get a
handle on which all_reduce does nothing, so they keep 1.

    python3 -m tdist.run --nproc-per-node 4 examples/python/all_reduce.py
"""
import numpy as np

import tdist as dist
from _launch import main


def run(rank, size):
    """Simple collective communication."""
    members = [r for r in (0, 1) if r < size]
    group = dist.new_group(members)
    tensor = np.ones(1, dtype=np.float32)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    expected = len(members) if rank in members else 1
    print(f"Rank {rank} has data {tensor[0]:g} (expected {expected})", flush=True)


if __name__ == "__main__":
    main(run)
