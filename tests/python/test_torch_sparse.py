"""Backend "tdist" through torch: sparse (COO) all_reduce as Gloo does it, and
all_reduce_coalesced as one tdist operation.

Each rank's sparse input is built from a seed every rank knows, so the expected result is the
dense sum of all ranks' inputs, computed locally; a Gloo group over the same ranks gives the
reference of indices and values too.
"""

import pytest
import torch
import torch.distributed as dist

import torch_harness

# (shape, sparse_dim, dtype)
SPARSE_CASES = [
    ((10,), 1, torch.float32),
    ((5, 4), 2, torch.float64),
    ((6, 3), 1, torch.float32),  # hybrid: one sparse and one dense dimension
    ((7, 2, 3), 2, torch.int64),
]


def sparse_input(rank, case, salt):
    """Rank `rank`'s uncoalesced input (duplicate indices included); rank 1 has none at all."""
    shape, sparse_dim, dtype = case
    g = torch.Generator().manual_seed(7919 * rank + 104729 * salt + 3)
    nnz = 0 if rank == 1 else 1 + (rank * 3 + salt) % 6
    indices = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g) for d in range(sparse_dim)])
    if nnz > 1:
        indices[:, -1] = indices[:, 0]  # a duplicate: the input is not coalesced
    values = torch.randint(-3, 5, (nnz,) + tuple(shape[sparse_dim:]), generator=g).to(dtype)
    return torch.sparse_coo_tensor(indices, values, shape)


def check_sparse(rank, world):
    gloo = dist.new_group(backend="gloo")
    for salt, case in enumerate(SPARSE_CASES):
        for async_op in (False, True):
            s = sparse_input(rank, case, salt)
            reference = sparse_input(rank, case, salt)
            work = dist.all_reduce(s, async_op=async_op)
            if async_op:
                assert work.wait() and work.is_completed()
                assert work.result()[0] is s or torch.equal(work.result()[0].to_dense(), s.to_dense())
            want = sum(sparse_input(r, case, salt).to_dense() for r in range(world))
            what = "rank %d: sparse all_reduce %s async=%s" % (rank, case, async_op)
            assert s.is_sparse and s.is_coalesced(), what + ": the result is not a coalesced sparse tensor"
            assert s.dtype == case[2] and s.shape == torch.Size(case[0]), what
            assert torch.equal(s.to_dense(), want), "%s:\n got %s\nwant %s" % (what, s.to_dense(), want)
            dist.all_reduce(reference, group=gloo)  # Gloo's own sparse all_reduce
            assert torch.equal(s._indices(), reference._indices()), what + ": indices differ from Gloo's"
            assert torch.equal(s._values(), reference._values()), what + ": values differ from Gloo's"
    # Only SUM, as Gloo; nothing is sent, so the group goes on.
    with pytest.raises(RuntimeError, match="SUM"):
        dist.all_reduce(sparse_input(rank, SPARSE_CASES[0], 0), op=dist.ReduceOp.MAX)
    # Shapes that differ between ranks: every rank fails alike, and the group goes on.
    bad = torch.sparse_coo_tensor(torch.zeros((1, 1), dtype=torch.long), torch.ones(1), (5 if rank == 0 else 6,))
    if world > 1:
        with pytest.raises(RuntimeError, match="shape"):
            dist.all_reduce(bad)
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(world)))


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_sparse_all_reduce_matches_gloo_and_the_dense_sum(world):
    torch_harness.run_ranks(check_sparse, world)


def check_coalesced(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    xs = [torch.full((3,), float(rank)), torch.arange(70001, dtype=torch.float32) * (rank + 1), torch.zeros(0),
          torch.full((2, 2), float(rank + 1))]
    total = sum(range(world))
    fut = dist.all_reduce_coalesced(xs, async_op=True)  # torch 1.13 returns the Work's future
    fut.wait()
    assert torch.equal(xs[0], torch.full((3,), float(total)))
    assert torch.equal(xs[1], torch.arange(70001, dtype=torch.float32) * (total + world))
    assert torch.equal(xs[3], torch.full((2, 2), float(total + world)))
    # One Work for the list, straight from the process group.
    ys = [torch.ones(4, dtype=torch.int64), torch.ones(1, dtype=torch.int64)]
    work = pg.allreduce_coalesced(ys, dist.AllreduceCoalescedOptions())
    assert work.wait() and work.is_completed()
    assert all(torch.equal(y, torch.full_like(y, world)) for y in ys)
    assert len(work.result()) == 2
    # Mismatched dtypes: refused by the backend too (torch's own check comes first in Python).
    with pytest.raises(RuntimeError, match="same dtype"):
        pg.allreduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.float64)], dist.AllreduceCoalescedOptions())
    with pytest.raises((RuntimeError, ValueError), match="different dtypes"):  # 1.13: RuntimeError; 2.x: ValueError
        dist.all_reduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world)))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_all_reduce_coalesced_is_one_operation(world):
    torch_harness.run_ranks(check_coalesced, world)
