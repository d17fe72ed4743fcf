#!/usr/bin/env python3
"""run.py of the tutorial (the setup template) on backend "tdist".

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_setup_template.py [world_size]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tdist.torch  # noqa: F401  registers the backend "tdist" with torch.distributed


def run(rank, size):
    """ 稍后实现的分布式函数。 """
    print("Hello from rank %d of %d (backend %s)" % (rank, size, dist.get_backend()), flush=True)


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
