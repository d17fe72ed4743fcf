"""What the tdist backend refuses, and how its errors read in Python.

Errors of arguments are raised before anything is sent, so the group stays
usable; errors between ranks (a missing peer, a timeout) name the peer.
"""

import datetime

import pytest
import torch
import torch.distributed as dist

import torch_harness


def raises(fn, *words):
    """Runs fn, expects a RuntimeError/ValueError whose message has every word (case-insensitive)."""
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        msg = str(e)
        for w in words:
            assert w.lower() in msg.lower(), "%r not in error: %s" % (w, msg)
        return msg
    raise AssertionError("no error raised; expected one mentioning %s" % (words,))


def refusals(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    raises(lambda: dist.all_reduce(torch.ones(4, 4).t()), "tdist", "all_reduce", "not contiguous")
    msg = raises(lambda: dist.broadcast(torch.ones(3).to_sparse(), 0), "broadcast", "sparse")
    # Where torch's dispatcher has a sparse kernel for broadcast, tdist refuses it and names itself;
    # older releases (2.11) refuse it in the dispatcher ("Could not run 'c10d::broadcast_' ...").
    assert "could not run" in msg.lower() or "tdist" in msg.lower(), msg
    raises(lambda: pg.allreduce([torch.ones(2), torch.ones(2)]), "all_reduce", "exactly one tensor", "got 2")
    raises(lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND), "all_reduce", "BAND", "float32")
    raises(lambda: dist.send(torch.ones(1), world + 3), "rank")
    work = dist.isend(torch.ones(1), (rank + 1) % world)
    raises(work.get_future, "tdist", "send", "no future")
    dist.recv(torch.zeros(1), (rank - 1) % world)
    work.wait()
    # monitored_barrier, through torch's function and the group's method.
    torch_harness.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    pg.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)
    # pg_options are Gloo's/NCCL's; the factory refuses them (on every rank: new_group is collective).
    raises(lambda: dist.new_group(backend="tdist", pg_options=object()), "pg_options")
    # After all that the group still works.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world))), t


def test_refusals_leave_the_group_usable():
    torch_harness.run_ranks(refusals, 2)


def absent_peer(rank, world):
    # Short-timeout subgroups that only rank 0 uses: rank 1 never arrives.
    quick = dist.new_group([0, 1], backend="tdist", timeout=datetime.timedelta(seconds=1))
    barrier_group = dist.new_group([0, 1], backend="tdist", timeout=datetime.timedelta(seconds=30))
    if rank == 0:
        msg = raises(lambda: dist.recv(torch.zeros(1), 1, group=quick), "recv", "rank 1")
        print("recv error:", msg)
        msg = raises(lambda: barrier_group.monitored_barrier(datetime.timedelta(seconds=1)), "1")
        print("monitored_barrier error:", msg)
    # Both ranks still share a healthy default group.
    dist.barrier()


def test_absent_peer_is_named():
    torch_harness.run_ranks(absent_peer, 2)


def mismatched_sizes(rank, world):
    # In a subgroup of their own, so that the failed group is not the default one.
    sub = dist.new_group([0, 1], backend="tdist", timeout=datetime.timedelta(seconds=30))
    if rank == 0:
        dist.send(torch.ones(4), 1, group=sub)
    else:
        raises(lambda: dist.recv(torch.zeros(3), 0, group=sub), "recv", "rank 0", "size mismatch")
    t = torch.ones(4 if rank == 0 else 3)
    raises(lambda: dist.all_reduce(t, group=sub), "all_reduce", "rank %d" % (1 - rank), "size")
    dist.barrier()


def test_mismatched_sizes_name_the_peer():
    torch_harness.run_ranks(mismatched_sizes, 2)


def group_names(rank, world):
    # The plugin names groups as the C++ library does: default_pg, and group(<global ranks>)#<n>
    # for the n-th group of those members; a rank is its global rank.
    transposed = lambda: torch.ones(4, 4).t()  # noqa: E731  refused before anything is sent
    msg = raises(lambda: dist.all_reduce(transposed()), "not contiguous")
    assert "rank %d in group default_pg: all_reduce" % rank in msg, msg
    dist.new_group([0, 1], backend="tdist")
    second = dist.new_group([0, 1], backend="tdist")
    only_1 = dist.new_group([1], backend="tdist")
    msg = raises(lambda: dist.broadcast(transposed(), 0, group=second), "not contiguous")
    assert "rank %d in group group(0,1)#1: broadcast" % rank in msg, msg
    if rank == 1:
        msg = raises(lambda: dist.all_reduce(transposed(), group=only_1), "not contiguous")
        assert "rank 1 in group group(1)#0: all_reduce" in msg, msg


def test_groups_are_named_as_in_cpp():
    torch_harness.run_ranks(group_names, 2)


def test_ctrl_c_interrupts_a_blocking_all_reduce_and_fails_the_group():
    import interrupt_harness

    interrupt_harness.check_interrupted("torch")


def test_ctrl_c_interrupts_the_wait_of_an_async_all_reduce():
    import interrupt_harness

    interrupt_harness.check_interrupted("torch", "wait")


def test_ctrl_c_interrupts_a_blocking_recv():
    import interrupt_harness

    interrupt_harness.check_interrupted("torch", "recv")


def aborted_group(rank, world):
    # torch's _abort_process_group reaches the plugin's abort: an operation under way (rank 1
    # never joins it) fails at once, naming the abort, and the rest of the job goes on.
    import time

    g = dist.new_group([0, 1], backend="tdist")
    t = torch.ones(3)
    dist.all_reduce(t, group=g)
    if rank == 0:
        work = dist.all_reduce(torch.ones(4), group=g, async_op=True)
        time.sleep(0.2)
        dist.distributed_c10d._abort_process_group(g)
        raises(work.wait, "rank 0 in group group(0,1)#0", "all_reduce", "aborted")
    dist.barrier()
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world))), t


def test_abort_fails_what_is_under_way():
    torch_harness.run_ranks(aborted_group, 2)
