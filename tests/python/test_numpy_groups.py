"""Init methods, groups and their helpers, non-members, subgroups, object collectives, DeviceMesh."""
import os
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks


def init_methods(rank, size, method, path):
    t = timedelta(seconds=WAIT_S)
    if method == "env":
        dist.init_process_group(init_method="env://", timeout=t)
    elif method == "tcp":
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                                rank=rank, world_size=size, timeout=t)
    elif method == "file":
        dist.init_process_group("tdist", init_method="file://" + path, rank=rank, world_size=size, timeout=t)
    elif method == "store":
        store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), size, rank == 0, t)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=t)
    # get_backend() answers the name given, as torch's does (none given: "gloo", torch's on CPU).
    given = {"env": "gloo", "tcp": "gloo", "file": "tdist", "store": "gloo"}[method]
    assert dist.get_rank() == rank and dist.get_world_size() == size and dist.get_backend() == given
    assert dist.group.WORLD is not None and dist.GroupMember.WORLD.size() == size
    t = np.array([rank], np.int64)
    dist.all_reduce(t)
    assert t[0] == size * (size - 1) // 2
    dist.destroy_process_group()
    assert dist.group.WORLD is None


@pytest.mark.parametrize("method", ["env", "tcp", "file", "store"])
def test_init_methods(method, tmp_path):
    run_ranks(init_methods, 3, method, str(tmp_path / "init"))


def groups(rank, size):
    init()
    evens = [r for r in range(size) if r % 2 == 0]
    g = dist.new_group(evens)
    if rank in evens:
        assert dist.get_process_group_ranks(g) == evens
        assert dist.get_rank(g) == evens.index(rank) and dist.get_world_size(g) == len(evens)
        assert dist.get_group_rank(g, rank) == evens.index(rank)
        assert dist.get_global_rank(g, 0) == 0
        t = np.array([rank], np.float64)
        dist.all_reduce(t, group=g)
        assert t[0] == sum(evens)
        t = np.array([rank], np.float64)
        dist.broadcast(t, src=evens[-1], group=g)
        assert t[0] == evens[-1]
        outs = [np.zeros(1, np.float64) for _ in evens]
        dist.all_gather(outs, np.array([rank * 2.0]), group=g)
        assert [o[0] for o in outs] == [r * 2.0 for r in evens]
    else:
        # Not a member: torch's NON_GROUP_MEMBER, rank -1, and operations do nothing.
        assert g == dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(g) == -1
        t = np.array([rank], np.float64)
        with pytest.warns(UserWarning, match="does not belong to the given group"):
            dist.all_reduce(t, group=g)
        assert t[0] == rank
    # Subgroups of 2 consecutive ranks, and by enumeration.
    cur, subs = dist.new_subgroups(group_size=2)
    assert len(subs) == size // 2 and dist.get_process_group_ranks(cur) == [rank - rank % 2, rank - rank % 2 + 1]
    t = np.array([1], np.int32)
    dist.all_reduce(t, group=cur)
    assert t[0] == 2
    cur, subs = dist.new_subgroups_by_enumeration([[0, size - 1], list(range(1, size - 1))])
    assert rank in dist.get_process_group_ranks(cur)
    with pytest.raises(ValueError):
        dist.new_subgroups(group_size=3)
    dist.destroy_process_group()


def test_groups():
    run_ranks(groups, 4)


class Thing:
    def __init__(self, rank):
        self.rank = rank
        self.payload = {"r": rank, "list": list(range(rank))}


def objects(rank, size):
    init()
    objs = [Thing(0), "text", 42] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs[0].payload == {"r": 0, "list": []} and objs[1:] == ["text", 42]
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "blob": b"x" * rank})
    assert gathered == [{"rank": r, "blob": b"x" * r} for r in range(size)]
    dst = size - 1
    out = [None] * size if rank == dst else None
    dist.gather_object(Thing(rank), out, dst=dst)
    if rank == dst:
        assert [t.rank for t in out] == list(range(size))
    recv = [None]
    dist.scatter_object_list(recv, [f"for {r}" for r in range(size)] if rank == 0 else None, src=0)
    assert recv == [f"for {rank}"]
    if rank == 0:
        dist.send_object_list([{"a": 1}, (2, 3)], dst=1)
    elif rank == 1:
        got = [None, None]
        assert dist.recv_object_list(got, src=0) == 0
        assert got == [{"a": 1}, (2, 3)]
    assert "pickle" in dist.broadcast_object_list.__doc__ and "trust" in dist.gather_object.__doc__
    dist.destroy_process_group()


def test_object_collectives():
    run_ranks(objects, 3)


def mesh(rank, size):
    init()
    m = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    assert m.shape == (2, 2) and m.ndim == 2 and m.mesh_dim_names == ("dp", "tp")
    np.testing.assert_array_equal(m.mesh, [[0, 1], [2, 3]])
    assert m.get_coordinate() == [rank // 2, rank % 2]
    assert m.get_local_rank("tp") == rank % 2 and m.get_local_rank(0) == rank // 2
    tp = m.get_group("tp")
    assert dist.get_process_group_ranks(tp) == [rank - rank % 2, rank - rank % 2 + 1]
    t = np.array([rank], np.int64)
    dist.all_reduce(t, group=m.get_group("dp"))
    assert t[0] == (rank % 2) * 2 + 2
    sub = m["tp"]
    assert sub.ndim == 1 and list(sub.mesh) == dist.get_process_group_ranks(tp)
    assert "DeviceMesh" in repr(m) and m.size() == 4 and m.size(1) == 2
    m2 = dist.DeviceMesh("cpu", [[0, 2], [1, 3]], mesh_dim_names=("a", "b"))
    assert dist.get_process_group_ranks(m2.get_group("b")) == ([0, 2] if rank in (0, 2) else [1, 3])
    with pytest.raises(dist.DistValueError):
        dist.init_device_mesh("cpu", (3, 2))
    dist.destroy_process_group()


def test_device_mesh():
    run_ranks(mesh, 4)


def monitored(rank, size):
    init()
    dist.monitored_barrier(timeout=timedelta(seconds=WAIT_S), wait_all_ranks=True)
    dist.destroy_process_group()


def test_monitored_barrier():
    run_ranks(monitored, 3)


def ported_calls(rank, size):
    """torch.distributed calls that ported programs use, with torch's results."""
    import pdb

    init()
    # get_node_local_rank: LOCAL_RANK, else the fallback, else an error.
    local = os.environ.pop("LOCAL_RANK", None)
    assert dist.get_node_local_rank(fallback_rank=7) == 7
    with pytest.raises(dist.DistValueError, match="LOCAL_RANK"):
        dist.get_node_local_rank()
    os.environ["LOCAL_RANK"] = str(rank)
    assert dist.get_node_local_rank() == rank
    if local is not None:
        os.environ["LOCAL_RANK"] = local
    # Debug levels, torch's names.
    before = os.environ.pop("TDIST_DEBUG", None)
    assert dist.get_debug_level() == dist.DebugLevel.OFF
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    assert dist.get_debug_level() == dist.DebugLevel.DETAIL  # (set in the C environment, not os.environ)
    dist.set_debug_level(dist.DebugLevel.OFF)
    dist.set_debug_level_from_env()
    if before is not None:
        os.environ["TDIST_DEBUG"] = before
    # Keyword arguments of torch 2.x that CPU groups and stores take and need not act on.
    g = dist.new_group(list(range(size)), group_desc="everyone", device_id=None)
    t = np.ones(3, np.float32)
    work = dist.all_reduce(t, group=g, async_op=True)
    work.wait()
    work.synchronize()
    assert np.all(t == size)
    store = dist.TCPStore("127.0.0.1", 0, None, True, use_libuv=False)
    store.set("k", "v")
    assert store.get("k") == b"v"
    # tdist.device_mesh as torch.distributed.device_mesh, and `with mesh:`.
    from tdist.device_mesh import DeviceMesh, init_device_mesh

    mesh = init_device_mesh("cpu", (size,))
    assert isinstance(mesh, DeviceMesh)
    with mesh as m:
        assert m is mesh
    # breakpoint: the named rank enters pdb, every rank waits at a barrier.
    stops = []
    real = pdb.Pdb.set_trace
    pdb.Pdb.set_trace = lambda self, frame=None: stops.append(frame)
    try:
        dist.breakpoint(rank=size - 1)
        dist.breakpoint(rank=0, skip=1)  # the first call with skip=1 does nothing
    finally:
        pdb.Pdb.set_trace = real
    assert len(stops) == (1 if rank == size - 1 else 0), stops
    dist.destroy_process_group()


def test_ported_calls():
    run_ranks(ported_calls, 2)


def non_members(rank, size):
    """torch's semantics for a rank outside a group: new_group gives it GroupMember.NON_GROUP_MEMBER;
    every collective and point-to-point call given that returns None (sync and async), warns, and
    leaves the arrays alone; recv returns -1; the rank helpers answer -1 or raise ValueError."""
    import warnings

    init()
    assert dist.GroupMember.WORLD is dist.group.WORLD or dist.GroupMember.WORLD.size() == size
    assert dist.GroupMember.NON_GROUP_MEMBER == -100
    members = [0, size - 1]
    g = dist.new_group(members)
    subs_cur, subs = dist.new_subgroups_by_enumeration([[0], [size - 1]])
    inside = rank in members
    if inside:
        assert isinstance(g, dist.ProcessGroup)
        t = np.array([rank + 1.0])
        w = dist.all_reduce(t, group=g, async_op=True)
        assert isinstance(w, dist.Work) and w.wait()
        assert t[0] == 1 + size
        assert isinstance(subs_cur, dist.ProcessGroup) and dist.get_process_group_ranks(subs_cur) == [rank]
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER
        # new_subgroups_by_enumeration: None for a rank in no subgroup, NON_GROUP_MEMBER in the list.
        assert subs_cur is None and subs == [dist.GroupMember.NON_GROUP_MEMBER] * 2
        a = np.arange(4, dtype=np.float32)
        before = a.copy()
        outs = [np.full(4, -1.0, np.float32) for _ in members]
        calls = {
            "broadcast": lambda asy: dist.broadcast(a, src=0, group=g, async_op=asy),
            "all_reduce": lambda asy: dist.all_reduce(a, group=g, async_op=asy),
            "all_reduce_coalesced": lambda asy: dist.all_reduce_coalesced([a, a.copy()], group=g, async_op=asy),
            "reduce": lambda asy: dist.reduce(a, dst=0, group=g, async_op=asy),
            "all_gather": lambda asy: dist.all_gather(outs, a, group=g, async_op=asy),
            "all_gather_into_tensor":
                lambda asy: dist.all_gather_into_tensor(np.zeros(8, np.float32), a, group=g, async_op=asy),
            "gather": lambda asy: dist.gather(a, None, dst=0, group=g, async_op=asy),
            "scatter": lambda asy: dist.scatter(a, None, src=0, group=g, async_op=asy),
            "reduce_scatter": lambda asy: dist.reduce_scatter(a[:2], [a[:2], a[2:]], group=g, async_op=asy),
            "reduce_scatter_tensor":
                lambda asy: dist.reduce_scatter_tensor(a[:2], a, group=g, async_op=asy),
            "all_to_all": lambda asy: dist.all_to_all(outs, [a, a], group=g, async_op=asy),
            "all_to_all_single": lambda asy: dist.all_to_all_single(a.copy(), a, group=g, async_op=asy),
            "barrier": lambda asy: dist.barrier(group=g, async_op=asy),
        }
        for name, call in calls.items():
            for asy in (False, True):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    assert call(asy) is None, f"{name} async_op={asy} returned something"
                assert any(f"Running {name} on global rank {rank}" in str(c.message) for c in caught), \
                    f"{name}: no warning in {[str(c.message) for c in caught]}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert dist.monitored_barrier(group=g) is None
            assert dist.send(a, dst=0, group=g) is None
            assert dist.recv(a, src=0, group=g) == -1
            assert dist.isend(a, dst=0, group=g) is None and dist.irecv(a, src=0, group=g) is None
            assert dist.batch_isend_irecv([dist.P2POp(dist.isend, a, 0, group=g)]) == []
            assert dist.broadcast_object_list([None], src=0, group=g) is None
            got = [None] * len(members)
            assert dist.all_gather_object(got, rank, group=g) is None and got == [None, None]
        np.testing.assert_array_equal(a, before)
        assert all((o == -1).all() for o in outs)
        assert dist.get_rank(g) == -1 and dist.get_world_size(g) == -1
        for helper in (lambda: dist.get_backend(g), lambda: dist.get_process_group_ranks(g),
                       lambda: dist.get_group_rank(g, 0), lambda: dist.get_global_rank(g, 0)):
            with pytest.raises(ValueError):
                helper()
        with pytest.raises(TypeError):
            dist.all_reduce(a, group=-1)  # only NON_GROUP_MEMBER stands for a group
        dist.destroy_process_group(g)  # nothing to destroy, as torch
    # The default group and the members' group still agree on what comes next.
    t = np.ones(2, np.int64)
    dist.all_reduce(t)
    assert (t == size).all()
    if inside:
        dist.barrier(group=g)
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [3, 5])
def test_non_members(world_size):
    run_ranks(non_members, world_size)


def split(rank, size):
    """split_group (torch 2.5+): every rank of the parent calls it with lists of the parent's ranks;
    it returns this rank's group, or None in none; overlapping lists are a ValueError everywhere."""
    init()
    lists = [[r for r in range(size) if r % 2 == 0], [r for r in range(size) if r % 2 == 1 and r != size - 1]]
    lists = [sorted(lst, reverse=True) for lst in lists if lst]
    g = dist.split_group(split_ranks=lists)
    mine = next((sorted(lst) for lst in lists if rank in lst), None)
    if mine is None:
        assert g is None
    else:
        assert isinstance(g, dist.ProcessGroup) and dist.get_process_group_ranks(g) == mine
        assert dist.get_rank(g) == mine.index(rank) and dist.get_world_size(g) == len(mine)
        t = np.array([rank + 1], np.int64)
        w = dist.all_reduce(t, group=g, async_op=True)
        w.wait()
        assert t[0] == sum(r + 1 for r in mine)
    with pytest.raises(ValueError, match="overlap"):
        dist.split_group(split_ranks=[[0], [0]])
    with pytest.raises(ValueError):
        dist.split_group(split_ranks=None)
    with pytest.raises(ValueError):
        dist.split_group(split_ranks=[[size]])
    # A split of a subgroup, in the parent's ranks: parent rank 0 alone.
    if size > 1:
        parent = dist.new_group(list(range(1, size)))
        if rank > 0:
            sub = dist.split_group(parent, [[0]], timeout=timedelta(seconds=WAIT_S), group_desc="first")
            if rank == 1:
                assert dist.get_process_group_ranks(sub) == [1]
            else:
                assert sub is None
        else:
            assert parent == dist.GroupMember.NON_GROUP_MEMBER
            with pytest.raises(ValueError):
                dist.split_group(parent, [[0]])
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 5])
def test_split_group(world_size):
    run_ranks(split, world_size)
