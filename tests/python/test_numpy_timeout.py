"""The default timeout: init_process_group(timeout=...) as torch takes it (a timedelta, or seconds),
TDIST_TIMEOUT where none is given, torch's 30 minutes where neither is."""
import os
import time
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, run_ranks


def lone_init(rank, size, setting, timeout, expected):
    if setting is None:
        os.environ.pop("TDIST_TIMEOUT", None)
    else:
        os.environ["TDIST_TIMEOUT"] = setting
    kwargs = {} if timeout is None else {"timeout": timeout}
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, **kwargs)
    assert dist._get_default_group().timeout == expected
    assert dist.new_group([0]).timeout == (expected if timeout is None else
                                           (timedelta(seconds=2) if setting == "2" else timedelta(minutes=30)))
    dist.destroy_process_group()


@pytest.mark.parametrize("setting,timeout,expected", [
    (None, None, timedelta(minutes=30)),
    ("2", None, timedelta(seconds=2)),
    ("2", timedelta(seconds=7), timedelta(seconds=7)),  # the argument wins
    ("2", 7, timedelta(seconds=7)),  # seconds, as a number
    (None, 1.5, timedelta(seconds=1.5)),
], ids=["default", "setting", "timedelta-wins", "int-seconds", "float-seconds"])
def test_init_timeout(setting, timeout, expected):
    run_ranks(lone_init, 1, setting, timeout, expected)


def recv_from_silent_rank(rank, size, flag):
    dist.init_process_group("gloo", timeout=timedelta(seconds=WAIT_S))
    dist.barrier()  # the ranks make the group together, well within its short timeout
    os.environ["TDIST_TIMEOUT"] = "1"
    group = dist.new_group()  # no timeout: the setting's
    assert group.timeout == timedelta(seconds=1)
    if rank == 1:  # never sends; stays until rank 0 is done, so that nothing but the timeout ends its wait
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.01)
        return
    start = time.monotonic()
    try:
        with pytest.raises(dist.DistError) as failure:
            dist.recv(np.zeros(4, dtype=np.int32), src=1, group=group)
    finally:
        open(flag, "w").close()
    took = time.monotonic() - start
    assert 0.9 <= took < 20, (took, str(failure.value))  # about a second, far below 30 minutes
    assert "1000 ms" in str(failure.value), str(failure.value)


def test_the_setting_makes_a_recv_from_a_silent_rank_fail_in_a_second(tmp_path):
    run_ranks(recv_from_silent_rank, 2, str(tmp_path / "rank0_done"))
