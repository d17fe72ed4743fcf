"""What a mistake gets from Python: a bad setting and a reduce op the dtype lacks raise tdist's
DistValueError (also a ValueError) naming what is wrong, as in C++."""
import os

import numpy as np
import pytest

import tdist as dist
from conftest import init, run_ranks


def bad_setting(rank, size, name, value):
    os.environ[name] = value
    with pytest.raises(dist.DistValueError) as raised:
        init()
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert f"{name}='{value}'" in message and "expected one of" in message, message
    assert not dist.is_initialized()


@pytest.mark.parametrize("name,value", [("TDIST_LOG_LEVEL", "loud"), ("TDIST_DEBUG", "verbose"),
                                        ("TORCH_DISTRIBUTED_DEBUG", "verbose")])
def test_a_bad_setting_fails_init_naming_it(name, value):
    run_ranks(bad_setting, 1, name, value)


def band_on_float(rank, size):
    init()
    t = np.ones(8, dtype=np.float32)
    with pytest.raises(dist.DistValueError) as raised:
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
    want = (f"rank {rank} in group default_pg: all_reduce #1: ReduceOp.BAND is not defined for float32 "
            "(bitwise ops need an integer or bool tensor")
    assert want in str(raised.value), str(raised.value)
    dist.all_reduce(t)  # nothing of the refused call was sent
    assert t.tolist() == [size] * 8
    dist.destroy_process_group()


def test_band_on_float32_names_rank_group_and_call():
    run_ranks(band_on_float, 2)
