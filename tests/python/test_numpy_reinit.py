"""init_process_group again after destroy_process_group, on the same fixed port (the one spawn put in
MASTER_PORT), every time: with and without subgroup handles kept by user code, over env:// and
tcp://, and when rank 0 (whose process serves the store) comes to destroy long after the others."""
import os
import time
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, run_ranks


def cycles(rank, size, method, keep, n):
    port = os.environ["MASTER_PORT"]  # fixed for every cycle
    kept = []
    for cycle in range(n):
        if method == "env":
            dist.init_process_group("gloo", timeout=timedelta(seconds=WAIT_S))
        else:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                                    timeout=timedelta(seconds=WAIT_S))
        if keep:
            kept.append(dist.new_group(list(range(size))))
        t = np.full(4, rank + cycle, dtype=np.int64)
        dist.all_reduce(t)
        assert t.tolist() == [size * (size - 1) // 2 + size * cycle] * 4, (cycle, t)
        dist.destroy_process_group()
        assert not dist.is_initialized()
    if keep:  # the kept handles belong to destroyed groups
        with pytest.raises(dist.DistError, match="destroyed"):
            dist.all_reduce(np.ones(1), group=kept[0])


@pytest.mark.parametrize("method", ["env", "tcp"])
@pytest.mark.parametrize("keep", [False, True], ids=["no-handle", "subgroup-kept"])
def test_init_destroy_cycles_on_one_port(method, keep):
    run_ranks(cycles, 3, method, keep, 6)


def late_rank0(rank, size):
    timeout = timedelta(seconds=8)  # destroy waits for rank 0 at most this long
    kept = []
    for cycle in range(3):
        dist.init_process_group("gloo", timeout=timeout)
        kept.append(dist.new_group([0, 1]))
        t = np.ones(2)
        dist.all_reduce(t)
        assert t.tolist() == [2.0, 2.0]
        if rank == 0 and cycle == 0:
            time.sleep(timeout.total_seconds() + 1.5)  # saving a checkpoint
        dist.destroy_process_group()


def test_reinit_when_rank0_destroys_late():
    """Rank 1 stops waiting for rank 0 in destroy and inits again at once: it must not join the old
    store, which rank 0 closes later (that failed as "0 of 2 ranks did not arrive: []")."""
    run_ranks(late_rank0, 2)
