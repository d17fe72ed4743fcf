"""The calls that enter past pybind11's dispatcher (python/ext/fast_entry.h): all_reduce, broadcast,
reduce, all_gather_into_tensor, reduce_scatter_tensor, send, recv, isend, irecv and Work.wait give
the same results and the same errors whichever way in a call takes: positional, by keyword in any
order, with a keyword built at run time, and with values only pybind11 converts (numpy.bool_,
numpy.int64), which go its way."""
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks

SPED_UP = ("all_reduce", "broadcast", "reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "send", "recv",
           "isend", "irecv")


def test_the_sped_up_functions_are_in_place_and_keep_their_documentation():
    # A function sped up is CPython's, with a capsule as its self; pybind11's has none of that.
    for name in SPED_UP:
        f = getattr(dist, name)
        assert type(f.__self__).__name__ == "PyCapsule", name
        assert f.__doc__ and name in f.__doc__, name
    assert "Reduces tensor over every rank" in dist.all_reduce.__doc__
    assert "Blocks until the operation completes" in dist.Work.wait.__doc__
    assert type(dist.Work.__dict__["wait"]).__name__ == "method_descriptor"


def collectives(rank, size):
    init()
    sum_of_ranks = size * (size - 1) / 2
    op_sum, op_max = dist.ReduceOp.SUM, dist.ReduceOp.MAX
    async_kw = {"".join(["async", "_op"]): True}  # a keyword that is not the interned string
    calls = [
        lambda a: dist.all_reduce(a),
        lambda a: dist.all_reduce(a, op_sum),
        lambda a: dist.all_reduce(a, op_sum, None, False),
        lambda a: dist.all_reduce(tensor=a, async_op=False, op=op_sum),
        lambda a: dist.all_reduce(a, async_op=True).wait(),
        lambda a: dist.all_reduce(a, **async_kw).wait(None),
        lambda a: dist.all_reduce(a, group=None),
        lambda a: dist.all_reduce(a, group=dist.group.WORLD),
        lambda a: dist.all_reduce(a, op_sum, dist.new_group(list(range(size))), True).wait(),
        lambda a: dist.all_reduce(a, async_op=np.bool_(False)),  # pybind11's way
        lambda a: dist.all_reduce(a, async_op=True).wait(timeout=timedelta(seconds=WAIT_S)),  # pybind11's way
    ]
    for i, call in enumerate(calls):
        a = np.full(5, rank, np.float32)
        assert call(a) in (None, True), i
        assert np.all(a == sum_of_ranks), (i, a)
    a = np.full(3, rank, np.int64)
    dist.all_reduce(a, op=op_max)
    assert np.all(a == size - 1)

    # broadcast: src positional, by keyword, group_src, and src as numpy.int64 (pybind11's way).
    root = size - 1
    for i, call in enumerate([
        lambda a: dist.broadcast(a, root),
        lambda a: dist.broadcast(a, src=root),
        lambda a: dist.broadcast(a, group_src=root),
        lambda a: dist.broadcast(src=root, tensor=a, async_op=True).wait(),
        lambda a: dist.broadcast(a, np.int64(root)),
    ]):
        a = np.full(4, rank, np.int32)
        call(a)
        assert np.all(a == root), (i, a)

    # reduce to rank 0 with MAX, every way of naming it.
    for i, call in enumerate([
        lambda a: dist.reduce(a, 0, op_max),
        lambda a: dist.reduce(a, dst=0, op=op_max),
        lambda a: dist.reduce(a, op=op_max, group_dst=0, async_op=True).wait(),
    ]):
        a = np.full(2, rank + 1, np.float64)
        call(a)
        if rank == 0:
            assert np.all(a == size), (i, a)

    # all_gather_into_tensor and reduce_scatter_tensor, positional and by keyword.
    for i, call in enumerate([
        lambda o, x: dist.all_gather_into_tensor(o, x),
        lambda o, x: dist.all_gather_into_tensor(input_tensor=x, output_tensor=o),
        lambda o, x: dist.all_gather_into_tensor(o, x, None, True).wait(),
    ]):
        out = np.zeros(2 * size, np.float32)
        call(out, np.full(2, rank, np.float32))
        assert np.all(out == np.repeat(np.arange(size, dtype=np.float32), 2)), (i, out)
    for i, call in enumerate([
        lambda o, x: dist.reduce_scatter_tensor(o, x),
        lambda o, x: dist.reduce_scatter_tensor(input=x, output=o, op=op_sum),
        lambda o, x: dist.reduce_scatter_tensor(o, x, op_sum, None, True).wait(),
    ]):
        out = np.zeros(3, np.float32)
        call(out, np.arange(3 * size, dtype=np.float32) + rank)
        expected = np.arange(3 * rank, 3 * rank + 3, dtype=np.float32) * size + sum_of_ranks
        assert np.all(out == expected), (i, out)

    # The errors pybind11 raises for a call that matches no signature.
    a = np.ones(2, np.float32)
    for bad in [
        lambda: dist.all_reduce(a, opp=op_sum),  # unknown keyword
        lambda: dist.all_reduce(a, op_sum, op=op_sum),  # given twice
        lambda: dist.all_reduce(a, op_sum, None, False, 5),  # too many
        lambda: dist.all_reduce(),  # no tensor
        lambda: dist.all_reduce(a, async_op="yes"),
        lambda: dist.broadcast(a, src="0"),
        lambda: dist.send(a, 1, tag=1.5),
        lambda: dist.Work.wait(5),  # not a Work
    ]:
        with pytest.raises(TypeError):
            bad()
    # The errors of the call itself, raised through the fast way as through pybind11's.
    with pytest.raises(dist.DistValueError, match="not C-contiguous"):
        dist.all_reduce(np.ones(6, np.float32)[::2])
    readonly = np.ones(2, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(dist.DistValueError, match="read-only"):
        dist.all_reduce(readonly)
    with pytest.raises(dist.DistValueError, match="BAND"):
        dist.all_reduce(np.ones(2, np.float32), op=dist.ReduceOp.BAND)
    with pytest.raises(TypeError, match="numpy.ndarray or an object with __dlpack__"):
        dist.all_reduce([1.0, 2.0])
    # Still in step after the errors.
    a = np.ones(1, np.float32)
    dist.all_reduce(a)
    assert a[0] == size
    dist.destroy_process_group()


@pytest.mark.parametrize("size", [1, 3])
def test_collectives_every_way_in(size):
    run_ranks(collectives, size)


def p2p(rank, size):
    init()
    peer = 1 - rank
    got = np.zeros(3, np.int64)
    ways = [
        (lambda t: dist.send(t, peer), lambda t: dist.recv(t, peer)),
        (lambda t: dist.send(t, dst=peer, tag=7), lambda t: dist.recv(tensor=t, tag=7, src=peer)),
        (lambda t: dist.send(t, group_dst=peer), lambda t: dist.recv(t, group_src=peer)),
        (lambda t: dist.isend(t, peer, None, 3).wait(), lambda t: dist.irecv(t, src=peer, tag=3).wait()),
        (lambda t: dist.send(t, np.int64(peer)), lambda t: dist.recv(t, np.int64(peer))),  # pybind11's way
    ]
    for i, (send, recv) in enumerate(ways):
        got[:] = 0
        if rank == 0:
            send(np.full(3, 10 + i, np.int64))
        else:
            result = recv(got)
            assert np.all(got == 10 + i), (i, got)
            if result not in (None, True):
                assert result == 0, (i, result)  # recv returns the sender
    # Any source: recv returns the sender.
    if rank == 0:
        dist.send(np.full(3, 99, np.int64), 1)
    else:
        assert dist.recv(got) == 0 and np.all(got == 99)
    dist.destroy_process_group()


def test_point_to_point_every_way_in():
    run_ranks(p2p, 2)
