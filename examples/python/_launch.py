"""How the examples start: under `python3 -m tdist.run` (or tdistrun) each process is one rank
and finds the others through the environment; run alone, a script spawns its ranks itself
(world size from its first argument) with tdist.spawn, which sets that environment."""
import os
import sys

import tdist as dist


def init_process(rank, size, fn, backend="gloo"):
    """The tutorial's init_process: initialize the default group (env://), run fn, clean up."""
    dist.init_process_group(backend, rank=rank, world_size=size)
    try:
        fn(rank, size)
    finally:
        dist.destroy_process_group()


def main(fn, default_world_size=2):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        init_process(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), fn)
    else:
        world_size = int(sys.argv[1]) if len(sys.argv) > 1 else default_world_size
        dist.spawn(init_process, args=(world_size, fn), nprocs=world_size)
