#!/usr/bin/env python3
"""阻塞点对点通信 (blocking point-to-point): rank 0 sends its incremented array to rank 1.

    python3 -m tdist.run --nproc-per-node 2 examples/python/p2p_blocking.py
    python3 examples/python/p2p_blocking.py [world_size]
"""
import numpy as np

import tdist as dist
from _launch import main


def run(rank, size):
    tensor = np.zeros(1, dtype=np.float32)
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        dist.send(tensor=tensor, dst=1)
    elif rank == 1:
        # Receive tensor from process 0
        dist.recv(tensor=tensor, src=0)
    print(f"Rank {rank} has data {tensor[0]:g}", flush=True)


if __name__ == "__main__":
    main(run)
