"""The NumPy module's collective checks (test_numpy_collectives.py, the same functions) on the
mpi backend: ctest runs this file under mpirun -n 4, one rank per process, rank and world size
from MPI_COMM_WORLD. Exits 0 when every check passes on this rank."""
import sys

import numpy as np

import tdist as dist
import test_numpy_collectives as checks


def main():
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "mpi", dist.get_backend()
    checks.check_all_reduce(rank, size)
    checks.check_broadcast_reduce(rank, size)
    checks.check_gathers(rank, size)
    checks.check_reduce_scatter_all_to_all(rank, size)
    checks.check_all_reduce_coalesced(rank, size)  # Backend's default: one MPI all_reduce per tensor, one Work
    # async_op work: several in flight, waited in reverse order, and a future.
    arrays = [np.full(5, rank + i, np.float32) for i in range(4)]
    works = [dist.all_reduce(a, op=dist.ReduceOp.MAX, async_op=True) for a in arrays]
    for w in reversed(works):
        w.wait()
    for i, a in enumerate(arrays):
        assert np.all(a == size - 1 + i), a
    b = np.ones(4, np.float64)
    assert dist.all_reduce(b, async_op=True).get_future().then(lambda f: float(f.value()[0].sum())).wait() == 4.0 * size
    objects = [None, None]
    if rank == 0:
        objects = ["mpi", {"ranks": size}]
    dist.broadcast_object_list(objects, src=0)
    assert objects == ["mpi", {"ranks": size}], objects
    dist.destroy_process_group()
    if rank == 0:
        print(f"the NumPy collective checks on the mpi backend, {size} ranks: ok")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        import traceback

        traceback.print_exc()
        sys.exit(1)
