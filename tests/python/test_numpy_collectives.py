"""Every collective on world sizes 1-5 against results computed locally with NumPy: several
dtypes and ops, sizes 0/1/odd, every root, uneven splits, arrays of any shape."""
import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.int16, np.float16, np.complex64,
          np.complex128, np.bool_]
SIZES = [0, 1, 7]


def data(rank, n, dtype, salt=0):
    """Rank r's input: small values so that sums and products fit every dtype."""
    v = (np.arange(n) * 3 + rank * 5 + salt) % 7 + 1
    if dtype == np.bool_:
        return (v % 2 == rank % 2)
    a = v.astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * (v % 3).astype(dtype)
    return a


def expected_reduce(inputs, op):
    stack = np.stack(inputs)
    if op == dist.ReduceOp.SUM:
        return stack.sum(axis=0).astype(stack.dtype) if stack.dtype != np.bool_ else stack.any(axis=0)
    if op == dist.ReduceOp.PRODUCT:
        return stack.prod(axis=0).astype(stack.dtype) if stack.dtype != np.bool_ else stack.all(axis=0)
    if op == dist.ReduceOp.MIN:
        return stack.min(axis=0)
    if op == dist.ReduceOp.MAX:
        return stack.max(axis=0)
    if op == dist.ReduceOp.BAND:
        return np.bitwise_and.reduce(stack, axis=0)
    if op == dist.ReduceOp.BOR:
        return np.bitwise_or.reduce(stack, axis=0)
    if op == dist.ReduceOp.BXOR:
        return np.bitwise_xor.reduce(stack, axis=0)
    raise AssertionError(op)


def ops_for(dtype):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT]
    if not np.issubdtype(dtype, np.complexfloating):
        ops += [dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        ops += [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
    return ops


def check_all_reduce(rank, size):
    for dtype in DTYPES:
        for n in SIZES:
            for op in ops_for(dtype):
                t = data(rank, n, dtype)
                dist.all_reduce(t, op=op)
                want = expected_reduce([data(r, n, dtype) for r in range(size)], op)
                np.testing.assert_array_equal(t, want, err_msg=f"all_reduce {op} {np.dtype(dtype)} n={n}")
    # AVG and PREMUL_SUM on floats; a 2-D array.
    t = data(rank, 6, np.float64).reshape(2, 3)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    want = np.mean([data(r, 6, np.float64) for r in range(size)], axis=0).reshape(2, 3)
    np.testing.assert_allclose(t, want)
    t = data(rank, 5, np.float32)
    dist.all_reduce(t, op=dist.ReduceOp.premul_sum(0.5))
    np.testing.assert_allclose(t, 0.5 * np.sum([data(r, 5, np.float32) for r in range(size)], axis=0))


def check_broadcast_reduce(rank, size):
    for root in range(size):
        for dtype in (np.float32, np.int64, np.complex128, np.bool_):
            t = data(rank, 7, dtype)
            dist.broadcast(t, src=root)
            np.testing.assert_array_equal(t, data(root, 7, dtype))
            t = data(rank, 7, dtype)
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
            if rank == root:
                np.testing.assert_array_equal(t, expected_reduce([data(r, 7, dtype) for r in range(size)],
                                                                 dist.ReduceOp.SUM))
    t = data(rank, 3, np.int32)
    dist.broadcast(t, group_src=size - 1)
    np.testing.assert_array_equal(t, data(size - 1, 3, np.int32))


def check_gathers(rank, size):
    for n in SIZES:
        for dtype in (np.float32, np.int16):
            outs = [np.full(n, -1, dtype) for _ in range(size)]
            dist.all_gather(outs, data(rank, n, dtype))
            for r in range(size):
                np.testing.assert_array_equal(outs[r], data(r, n, dtype))
            out = np.empty(size * n, dtype)
            dist.all_gather_into_tensor(out, data(rank, n, dtype))
            np.testing.assert_array_equal(out, np.concatenate([data(r, n, dtype) for r in range(size)]))
    # Uneven all_gather: rank r contributes r + 1 elements. Stacked all_gather_into_tensor.
    outs = [np.zeros(r + 1, np.float64) for r in range(size)]
    dist.all_gather(outs, data(rank, rank + 1, np.float64))
    for r in range(size):
        np.testing.assert_array_equal(outs[r], data(r, r + 1, np.float64))
    stacked = np.zeros((size, 2, 3), np.float32)
    dist.all_gather_into_tensor(stacked, data(rank, 6, np.float32).reshape(2, 3))
    for r in range(size):
        np.testing.assert_array_equal(stacked[r].ravel(), data(r, 6, np.float32))
    for root in range(size):
        gl = [np.zeros(5, np.int32) for _ in range(size)] if rank == root else None
        dist.gather(data(rank, 5, np.int32), gather_list=gl, dst=root)
        if rank == root:
            for r in range(size):
                np.testing.assert_array_equal(gl[r], data(r, 5, np.int32))
        out = np.zeros(5, np.int32)
        sl = [data(r, 5, np.int32, salt=root) for r in range(size)] if rank == root else None
        dist.scatter(out, scatter_list=sl, src=root)
        np.testing.assert_array_equal(out, data(rank, 5, np.int32, salt=root))


def check_reduce_scatter_all_to_all(rank, size):
    for n in (0, 1, 3):
        ins = [data(rank, n, np.float32, salt=j) for j in range(size)]
        out = np.zeros(n, np.float32)
        dist.reduce_scatter(out, ins, op=dist.ReduceOp.MAX)
        np.testing.assert_array_equal(out, np.max([data(r, n, np.float32, salt=rank) for r in range(size)], axis=0))
        big = np.concatenate([data(rank, n, np.int64, salt=j) for j in range(size)])
        out = np.zeros(n, np.int64)
        dist.reduce_scatter_tensor(out, big)
        np.testing.assert_array_equal(out, np.sum([data(r, n, np.int64, salt=rank) for r in range(size)], axis=0))
        outs = [np.zeros(n, np.int32) for _ in range(size)]
        dist.all_to_all(outs, [data(rank, n, np.int32, salt=j) for j in range(size)])
        for r in range(size):
            np.testing.assert_array_equal(outs[r], data(r, n, np.int32, salt=rank))
    # Equal splits, then uneven: rank r sends (r + j) % 3 rows of 2 columns to rank j.
    inp = data(rank, size * 4, np.float64).reshape(size * 2, 2)
    out = np.zeros_like(inp)
    dist.all_to_all_single(out, inp)
    for r in range(size):
        np.testing.assert_array_equal(out[2 * r:2 * r + 2], data(r, size * 4, np.float64).reshape(-1, 2)[2 * rank:2 * rank + 2])
    in_splits = [(rank + j) % 3 for j in range(size)]
    out_splits = [(r + rank) % 3 for r in range(size)]
    inp = data(rank, 2 * sum(in_splits), np.float32).reshape(-1, 2)
    out = np.full((sum(out_splits), 2), -1, np.float32)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    row = 0
    for r in range(size):
        r_splits = [(r + j) % 3 for j in range(size)]
        start = sum(r_splits[:rank])
        src = data(r, 2 * sum(r_splits), np.float32).reshape(-1, 2)[start:start + r_splits[rank]]
        np.testing.assert_array_equal(out[row:row + len(src)], src)
        row += len(src)
    dist.barrier()


def all_collectives(rank, size):
    init()
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == size
    check_all_reduce(rank, size)
    check_broadcast_reduce(rank, size)
    check_gathers(rank, size)
    check_reduce_scatter_all_to_all(rank, size)
    dist.destroy_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5])
def test_every_collective(world_size):
    run_ranks(all_collectives, world_size)


def large(rank, size):
    init()
    n = (1 << 22) + 3  # 16 MiB of float32, odd
    t = np.full(n, rank + 1, np.float32)
    dist.all_reduce(t)
    assert t[0] == t[-1] == size * (size + 1) / 2 and np.all(t == t[0])
    dist.destroy_process_group()


def test_large_all_reduce():
    run_ranks(large, 2)


def async_ops(rank, size):
    init()
    t = np.full(3, rank, np.int64)
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True and work.is_completed() and work.is_success() and work.exception() is None
    assert np.all(t == sum(range(size)))
    # Several in flight, then waited in reverse order; futures and then().
    arrays = [np.full(2, rank + i, np.float32) for i in range(4)]
    works = [dist.all_reduce(a, op=dist.ReduceOp.MAX, async_op=True) for a in arrays]
    for w in reversed(works):
        w.wait()
    for i, a in enumerate(arrays):
        assert np.all(a == size - 1 + i)
    b = np.ones(4, np.float64)
    fut = dist.all_reduce(b, async_op=True).get_future()
    chained = fut.then(lambda f: float(f.value()[0].sum()))
    assert chained.wait() == 4.0 * size
    assert fut.value()[0] is b and fut.done()
    w = dist.broadcast(np.arange(3), src=0, async_op=True)
    assert w.wait(timeout=60)
    assert dist.barrier(async_op=True).wait()
    dist.destroy_process_group()


def test_async_work_and_futures():
    run_ranks(async_ops, 3)


def check_all_reduce_coalesced(rank, size):
    """all_reduce_coalesced: every tensor of the list reduced in place (sizes 0, 1, odd, and one
    larger than the packing limit), every dtype and op, one Work with async_op whose future lists
    the arrays; one array alone; mismatched dtypes are a ValueError before anything is sent."""
    sizes = [7, 0, 1, 3, 70001]
    for dtype in DTYPES:
        for op in ops_for(dtype):
            ts = [data(rank, n, dtype, salt=k) for k, n in enumerate(sizes)]
            assert dist.all_reduce_coalesced(ts, op=op) is None
            for k, n in enumerate(sizes):
                want = expected_reduce([data(r, n, dtype, salt=k) for r in range(size)], op)
                np.testing.assert_array_equal(ts[k], want, err_msg=f"{op} {np.dtype(dtype)} tensor {k} n={n}")
    ts = [data(rank, n, np.float64, salt=k) for k, n in enumerate(sizes)]
    fut = dist.all_reduce_coalesced(ts, op=dist.ReduceOp.AVG, async_op=True)  # torch's: the Work's future
    assert isinstance(fut, dist.Future)
    value = fut.wait()
    assert len(value) == len(ts) and all(v is t for v, t in zip(value, ts))
    for k, n in enumerate(sizes):
        np.testing.assert_allclose(ts[k], np.mean([data(r, n, np.float64, salt=k) for r in range(size)], axis=0))
    one = np.full(5, rank + 1, np.int32)
    dist.all_reduce_coalesced(one, op=dist.ReduceOp.MAX)
    assert (one == size).all()
    a, b = np.ones(3, np.float32), np.ones(3, np.float64)
    with pytest.raises(ValueError, match="same dtype"):
        dist.all_reduce_coalesced([a, b])
    with pytest.raises(ValueError):
        dist.all_reduce_coalesced([])
    assert (a == 1).all() and (b == 1).all()
    dist.all_reduce_coalesced([a, np.ones(2, np.float32)])  # the ranks still agree
    assert (a == size).all()


def coalesced(rank, size):
    init()
    check_all_reduce_coalesced(rank, size)
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 8])
def test_all_reduce_coalesced(world_size):
    run_ranks(coalesced, world_size)


def check_all_gather_coalesced(rank, size):
    """all_gather_coalesced: output_tensor_lists[r][i] receives input i of rank r, for inputs of
    sizes 0, 1, odd and large and of mixed dtypes; one Work with async_op; a wrong list shape is a
    ValueError before anything is sent."""
    sizes = [7, 0, 1, 50003]
    for dtype in DTYPES:
        ins = [data(rank, n, dtype, salt=k) for k, n in enumerate(sizes)]
        outs = [[np.zeros(n, dtype) for n in sizes] for _ in range(size)]
        assert dist.all_gather_coalesced(outs, ins) is None
        for r in range(size):
            for k, n in enumerate(sizes):
                np.testing.assert_array_equal(outs[r][k], data(r, n, dtype, salt=k),
                                              err_msg=f"{np.dtype(dtype)} input {k} of rank {r}")
    ins = [np.full(3, rank, np.int64), np.full(2, rank + 0.5, np.float32)]
    outs = [[np.zeros(3, np.int64), np.zeros(2, np.float32)] for _ in range(size)]
    fut = dist.all_gather_coalesced(outs, ins, async_op=True)  # torch's: the Work's future
    assert isinstance(fut, dist.Future)
    fut.wait()
    for r in range(size):
        assert (outs[r][0] == r).all() and (outs[r][1] == r + 0.5).all()
    with pytest.raises(ValueError, match="one per rank"):
        dist.all_gather_coalesced(outs[:-1] if size > 1 else outs + outs, ins)
    with pytest.raises(ValueError, match="inputs"):
        dist.all_gather_coalesced([o[:1] for o in outs], ins)
    dist.all_gather_coalesced(outs, ins)  # the ranks still agree
    assert all((outs[r][0] == r).all() for r in range(size))


def gathered_coalesced(rank, size):
    init()
    check_all_gather_coalesced(rank, size)
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 8])
def test_all_gather_coalesced(world_size):
    run_ranks(gathered_coalesced, world_size)


def future_result(rank, size, flag):
    """Work.get_future_result (torch 2.6): a Future that completes, never with an error, with a
    WorkResult: SUCCESS for an operation that succeeded, TIMEOUT for one that failed at its
    deadline."""
    import os
    import time
    from datetime import timedelta

    init()
    t = np.ones(4, np.float32)
    fut = dist.all_reduce(t, async_op=True).get_future_result()
    assert fut.wait() == dist.WorkResult.SUCCESS and fut.value() == 0 and fut.done()
    assert fut.then(lambda f: f.value().name).wait() == "SUCCESS"
    # A group whose rank 1 never joins the all_reduce: TIMEOUT on rank 0 at the group's deadline.
    g = dist.new_group([0, 1], timeout=timedelta(seconds=1))
    if rank == 0:
        work = dist.all_reduce(np.ones(3), group=g, async_op=True)
        res = work.get_future_result()
        assert res.wait() == dist.WorkResult.TIMEOUT, res.value()
        assert not work.is_success() and "Timed out" in str(work.exception())
        open(flag, "w").close()
    else:
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.01)
    os._exit(0)  # the failed group's connections are shared with the default group: skip its teardown


def test_get_future_result(tmp_path):
    run_ranks(future_result, 2, str(tmp_path / "rank0_saw_timeout"))
