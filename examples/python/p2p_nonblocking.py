#!/usr/bin/env python3
"""非阻塞点对点通信 (non-blocking point-to-point): isend/irecv return a Work; the array may be
touched only after req.wait() returns.

    python3 -m tdist.run --nproc-per-node 2 examples/python/p2p_nonblocking.py
"""
import numpy as np

import tdist as dist
from _launch import main


def run(rank, size):
    tensor = np.zeros(1, dtype=np.float32)
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        print("Rank 0 started sending", flush=True)
    elif rank == 1:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        print("Rank 1 started receiving", flush=True)
    if req is not None:
        req.wait()
    print(f"Rank {rank} has data {tensor[0]:g}", flush=True)


if __name__ == "__main__":
    main(run)
