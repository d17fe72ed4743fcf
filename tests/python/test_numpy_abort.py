"""_abort_process_group of a subgroup fails that group alone: its members' pending and later operations
fail naming the rank that aborted it, and the default group and another group go on."""
import threading
import time

import numpy as np
import pytest

import tdist as dist
from conftest import init, run_ranks


def abort_subgroup(rank, size):
    init()
    sub = dist.new_group([1, 2, 3])
    other = dist.new_group([0, 1, 2])
    if rank in (1, 2, 3):
        t = np.ones(4, np.float32)
        dist.all_reduce(t, group=sub)
        assert t[0] == 3
    t = np.ones(1000, np.float32)
    if rank == 2:
        # A watchdog aborts the subgroup while this rank waits in it for a message that never comes.
        dog = threading.Thread(target=lambda: (time.sleep(0.3), dist._abort_process_group(sub)))
        dog.start()
        with pytest.raises(dist.DistBackendError, match=r"rank 2 in group .*aborted \(ProcessGroup.abort\(\)\)"):
            dist.recv(np.zeros(4, np.float32), src=3, group=sub, tag=4)
        dog.join()
    elif rank in (1, 3):
        # Rank 2 never joins: the pending all_reduce fails naming it, not at the group's timeout.
        with pytest.raises(dist.DistError, match=r"rank 2 .*abort") as failed:
            dist.all_reduce(t, group=sub)
        assert "Timed out" not in str(failed.value)
    if rank in (1, 2, 3):
        with pytest.raises(dist.DistError, match="abort"):
            dist.all_reduce(t, group=sub)
    # Everything else goes on.
    t = np.full(100000, rank, np.float32)
    dist.all_reduce(t)
    assert t[0] == t[-1] == sum(range(size))
    if rank in (0, 1, 2):
        t = np.full(10, rank, np.float32)
        dist.all_reduce(t, group=other)
        assert t[0] == 3
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("shm", ["1", "0"])
def test_abort_subgroup(shm, monkeypatch):
    monkeypatch.setenv("TDIST_SHM", shm)
    run_ranks(abort_subgroup, 4)
