#!/usr/bin/env python3
"""run.py: the tutorial's setup template on tdist and NumPy (import tdist as dist instead of torch).

Starts world_size processes (first argument, default 2); each initializes the distributed
environment, creates the default group (dist.init_process_group) and runs `run`. As in the
tutorial it starts the processes itself with multiprocessing's "spawn" method; MASTER_PORT is a
free port unless set in the environment (the tutorial's fixed 29500 could be taken).
"""
import multiprocessing as mp
import os
import socket
import sys

import tdist as dist


def run(rank, size):
    """The distributed function, filled in by the other examples."""
    print(f"Hello from rank {rank} of {size} (backend {dist.get_backend()})", flush=True)


def init_process(rank, size, fn, port, backend="gloo"):
    """Initializes the distributed environment."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    port = int(os.environ.get("MASTER_PORT") or free_port())
    processes = []
    mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run, port))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    sys.exit(max(p.exitcode != 0 for p in processes))
