#!/usr/bin/env python3
"""非阻塞点对点通信 (non-blocking point-to-point) of the tutorial on backend "tdist".

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_p2p_nonblocking.py
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tdist.torch  # noqa: F401  registers the backend "tdist" with torch.distributed


def run(rank, size):
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        # 将张量发送到进程1
        req = dist.isend(tensor=tensor, dst=1)
        print("Rank 0 started sending", flush=True)
    elif rank == 1:
        # 从进程0接收张量
        req = dist.irecv(tensor=tensor, src=0)
        print("Rank 1 started receiving", flush=True)
    if req is not None:
        req.wait()
    print("Rank ", rank, " has data ", tensor[0], flush=True)


def init_process(rank, size, fn, backend="tdist"):
    """ 初始化分布式环境。 """
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29500")  # the tutorial's port, unless one is given
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    # Rank 0 hosts the store; it waits here until every rank is past
    # init_process_group's use of it before it leaves.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    processes = []
    mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    sys.exit(1 if any(p.exitcode != 0 for p in processes) else 0)
