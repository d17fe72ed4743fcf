"""tdist.Work, a type of CPython's C API (python/ext/work_object.cpp): what it is, its methods'
arguments and errors, and that it keeps the arrays of an operation alive as long as the operation
runs, also once the program dropped it, and not longer."""
import gc
import sys
import weakref
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks


def test_the_type_is_made_by_operations_only():
    assert dist.Work.__module__ == dist._tdist.__name__ and dist.Work.__name__ == "Work"
    with pytest.raises(TypeError):
        dist.Work()
    assert "async_op=True" in dist.Work.__doc__
    for name in ("wait", "is_completed", "is_success", "exception", "source_rank", "result", "get_future",
                 "get_future_result", "synchronize"):
        assert getattr(dist.Work, name).__doc__, name


def methods(rank, size):
    init()
    a = np.full(4, rank + 1, np.float32)
    w = dist.all_reduce(a, async_op=True)
    assert isinstance(w, dist.Work)
    assert w.wait() is True and w.wait(None) is True and w.wait(timeout=WAIT_S) is True
    assert w.wait(timedelta(seconds=WAIT_S)) is True
    assert np.all(a == size * (size + 1) / 2)
    assert w.is_completed() and w.is_success() and w.exception() is None
    assert w.synchronize() is None
    out = w.result()
    assert len(out) == 1 and out[0] is a
    assert w.get_future().wait()[0] is a
    assert repr(w).startswith("<tdist.Work all_reduce #") and repr(w).endswith(" completed>")
    for bad in [
        lambda: w.wait(1, 2),  # too many
        lambda: w.wait(timeout=1, other=2),  # unknown keyword
        lambda: w.wait(1, timeout=1),  # given twice
        lambda: w.wait("soon"),  # not a duration (its message names what it must be)
        lambda: dist.Work.wait(5),  # not a Work
        lambda: w.is_completed(1),  # takes nothing
    ]:
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError, match="Work.wait: timeout must be a datetime.timedelta or a number of seconds, "
                                        "not str"):
        w.wait("soon")
    # A point-to-point Work: the source of a receive from any rank.
    b = np.zeros(1, np.int64)
    if rank == 0:
        for _ in range(size - 1):
            r = dist.irecv(b)
            r.wait()
            assert r.source_rank() == r._source_rank() == b[0]
    else:
        dist.isend(np.full(1, rank, np.int64), 0).wait()
    dist.barrier()
    dist.destroy_process_group()


def test_methods_and_arguments():
    run_ranks(methods, 2)


def dropped_while_running(rank, size, path):
    init()
    signal = dist.FileStore(path, size)
    a = np.ones(1 << 10, np.float32)
    before = sys.getrefcount(a)
    for _ in range(200):  # made and freed in a loop: nothing of them stays behind
        dist.all_reduce(a, async_op=True).wait()
    assert sys.getrefcount(a) == before
    a[:] = 1
    if rank == 0:
        # Dropped before rank 1 calls: the operation will still write the array, which must stay
        # alive until it is over.
        alive = weakref.ref(a)
        dist.all_reduce(a, async_op=True)
        del a
        gc.collect()
        assert alive() is not None, "the array of a running operation was freed"
        signal.set("dropped", "1")
    else:
        signal.wait(["dropped"])
        w = dist.all_reduce(a, async_op=True)
        w.wait()
        assert np.all(a == 2)
    # The group's operations end in order: after the barrier rank 0's all_reduce is over, and the
    # next call drops the arrays it kept for operations that have ended.
    dist.barrier()
    dist.all_reduce(np.ones(1, np.float32))
    if rank == 0:
        gc.collect()
        assert alive() is None, "the array stayed alive after its operation ended"
    dist.destroy_process_group()


def test_a_dropped_work_keeps_its_arrays_until_the_operation_ends(tmp_path):
    run_ranks(dropped_while_running, 2, str(tmp_path / "signal"))
