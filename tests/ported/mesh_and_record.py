"""A torch.distributed program, ported by changing its imports: DeviceMesh, the
distributed_c10d path and elastic's @record. Run: tdistrun --standalone --nproc-per-node 2
mesh_and_record.py [--fail-on-rank R]"""
import sys

import torch

import tdist as dist  # was: import torch.distributed as dist
from tdist.device_mesh import init_device_mesh  # was: from torch.distributed.device_mesh import ...
from tdist.distributed_c10d import get_pg_count  # was: from torch.distributed.distributed_c10d import ...
from tdist.elastic.multiprocessing.errors import record  # was: from torch.distributed.elastic...


@record
def main():
    mesh = init_device_mesh("cpu", (1, 2), mesh_dim_names=("dp", "tp"))
    rank = dist.get_rank()
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, group=mesh.get_group("tp"))
    assert t.item() == 3.0 and mesh["tp"].size() == 2, t
    assert get_pg_count() >= 1
    if "--fail-on-rank" in sys.argv and rank == int(sys.argv[sys.argv.index("--fail-on-rank") + 1]):
        raise ValueError(f"planned failure on rank {rank}")
    print(f"rank {rank}: mesh ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
