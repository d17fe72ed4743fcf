#!/usr/bin/env python3
"""我们自己的Ring-Allreduce: the tutorial's ring reduce built from isend/recv, checked against
dist.all_reduce.

The tutorial's version passes whole arrays round the ring (size - 1 steps, alternating two
buffers); after it every rank holds the sum over all ranks.

    python3 -m tdist.run --nproc-per-node 4 examples/python/ring_all_reduce.py
"""
import numpy as np

import tdist as dist
from _launch import main


def allreduce(send, recv):
    """Ring reduce with addition (the tutorial's code, NumPy's copy() for torch's clone())."""
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.copy()
    recv_buff = send.copy()
    accum = send.copy()

    left = ((rank - 1) + size) % size
    right = (rank + 1) % size

    for i in range(size - 1):
        if i % 2 == 0:
            # Send send_buff
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            # Send recv_buff
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def run(rank, size):
    send = np.arange(rank, rank + 10, dtype=np.float32)  # rank r contributes [r, ..., r+9]
    recv = np.zeros_like(send)
    allreduce(send, recv)
    expected = send.copy()
    dist.all_reduce(expected, op=dist.ReduceOp.SUM)
    ok = np.array_equal(recv, expected)
    data = "[" + ", ".join(f"{v:g}" for v in recv) + "]"
    verdict = "matches all_reduce" if ok else "DIFFERS from all_reduce " + str(expected)
    print(f"Rank {rank} has data {data} {verdict}", flush=True)  # one write: ranks share stdout
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main(run)
