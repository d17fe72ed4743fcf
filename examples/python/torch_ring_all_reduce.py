#!/usr/bin/env python3
"""我们自己的Ring-Allreduce: the tutorial's allreduce(send, recv) from isend/recv, on backend "tdist".

Every rank checks its result against dist.all_reduce.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_ring_all_reduce.py [world_size]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tdist.torch  # noqa: F401  registers the backend "tdist" with torch.distributed


def allreduce(send, recv):
    """ 使用加法的环形reduce实现。 """
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()

    left = ((rank - 1) + size) % size
    right = (rank + 1) % size

    for i in range(size - 1):
        if i % 2 == 0:
            # 发送send_buff
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            # 发送recv_buff
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def run(rank, size):
    send = torch.arange(4, dtype=torch.float32) + 10 * rank
    recv = torch.zeros(4)
    allreduce(send, recv)
    expected = send.clone()
    dist.all_reduce(expected)
    print("Rank ", rank, " has data ", recv[0], flush=True)
    assert torch.equal(recv, expected), "ring all-reduce gave %s, all_reduce %s" % (recv, expected)


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
