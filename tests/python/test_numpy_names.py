"""The names torch 2.x programs use, at torch's paths and with torch's answers: distributed_c10d,
the backend queries and register_backend (a backend written in Python), get_pg_count,
group_desc, ProcessGroup's methods, set_timeout, Store.list_keys/clone, DeviceMesh._flatten and
backend_override, the elastic error paths."""
import json
import pdb
import pickle
import types
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks


def test_torch_import_paths():
    from tdist.distributed_c10d import _get_default_group, get_pg_count, new_group  # noqa: F401
    import tdist.distributed_c10d as c10d
    from tdist.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure, record  # noqa: F401

    assert c10d.new_group is dist.new_group and c10d.all_gather_coalesced is dist.all_gather_coalesced
    assert "get_backend_config" in c10d.__all__ and "record_comm" in c10d.missing_torch_names
    assert set(c10d.__all__).isdisjoint(c10d.missing_torch_names)
    with pytest.raises(ImportError):
        from tdist.distributed_c10d import record_comm  # noqa: F401
    from tdist.distributed_c10d import AllreduceOptions, BackendConfig, all_gather_single  # noqa: F401
    assert {"BackendConfig", "BroadcastOptions", "gather_into_tensor", "reduce_scatter_single"} <= set(c10d.__all__)
    assert dist.device_mesh.DeviceMesh is dist.DeviceMesh and callable(dist.DeviceMesh._flatten)
    assert record is dist.record


def test_backend_queries():
    assert dist.is_backend_available("gloo") and dist.is_backend_available("tdist")
    assert dist.is_backend_available("cpu:gloo,cuda:tdist")
    assert not dist.is_backend_available("ucc") and not dist.is_backend_available("no_such_backend")
    assert not dist.is_backend_available("cpu:gloo,xpu:xccl")
    assert dist.is_ucc_available() is False and dist.is_xccl_available() is False
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device("cuda:1") == "nccl"
    with pytest.raises(ValueError, match="Default backend not registered for device : tpu"):
        dist.get_default_backend_for_device("tpu")
    assert dist.supports_complex(dist.ReduceOp.SUM) and not dist.supports_complex(dist.ReduceOp.MAX)
    with pytest.raises(ValueError, match="'gloo' is a built-in backend"):
        dist.Backend.register_backend("gloo", lambda *a: None, devices="cpu")
    with pytest.raises(ValueError, match="cpu tensors only"):
        dist.Backend.register_backend("mycuda", lambda *a: None, devices=["cuda"])
    assert dist.get_pg_count() == 0


def test_backend_config_and_options_classes():
    assert str(dist.BackendConfig("gloo")) == "cpu:gloo,cuda:gloo"
    assert dist.BackendConfig("cpu:gloo,cuda:NCCL").get_device_backend_map() == {"cpu": "gloo", "cuda": "nccl"}
    assert dist.BackendConfig("undefined").get_device_backend_map() == {"cpu": "gloo"}
    assert dist.BackendConfig("mpi").device_backend_map == {"cpu": "mpi"}
    with pytest.raises(ValueError, match="Duplicate device type cpu"):
        dist.BackendConfig("cpu:gloo,cpu:tdist")
    with pytest.raises(ValueError, match="Invalid device:backend pairing"):
        dist.BackendConfig("cpu:gloo,cuda")
    o = dist.ReduceOptions()
    assert (o.reduceOp, o.rootRank, o.rootTensor, o.timeout, o.asyncOp) == (dist.ReduceOp.SUM, 0, 0, None, True)
    assert dist.BarrierOptions().device_ids == [] and dist.BarrierOptions().device_ids is not dist.BarrierOptions().device_ids
    assert "rootRank=0" in repr(dist.ScatterOptions()) and dist.AllToAllOptions().timeout is None
    assert isinstance(dist.AllreduceCoalescedOptions(), dist.AllreduceOptions)


def single_tensor_forms(rank, size):
    """torch 2.15's *_single names, and the options classes given to a ProcessGroup's methods."""
    init()
    out = np.zeros(size * 2, np.int64)
    dist.all_gather_single(out, np.array([rank, rank], np.int64))
    assert out.tolist() == [r for r in range(size) for _ in range(2)]
    red = np.zeros(1, np.int64)
    dist.reduce_scatter_single(red, np.arange(size, dtype=np.int64) + rank, op=dist.ReduceOp.MAX)
    assert red[0] == rank + size - 1
    for stacked in (False, True):
        whole = np.zeros((size, 2) if stacked else (size * 2,), np.int64) if rank == 1 else None
        dist.gather_single(np.array([rank, -rank], np.int64), whole, dst=1)
        if rank == 1:
            assert whole.reshape(-1).tolist() == [v for r in range(size) for v in (r, -r)]
    wrong = np.zeros(3, np.int64) if rank == 0 else None
    if rank == 0:
        with pytest.raises(ValueError, match="holds neither"):
            dist.gather_into_tensor(np.zeros(2, np.int64), wrong)
    pg = dist._get_default_group()
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    t = np.array([rank], np.int64)
    pg.allreduce([t], opts).wait()
    assert t[0] == size - 1
    b = dist.BroadcastOptions()
    b.rootRank = size - 1
    t = np.array([rank], np.int64)
    pg.broadcast([t], b).wait()
    assert t[0] == size - 1
    pg.barrier(dist.BarrierOptions()).wait()
    dist.destroy_process_group()


def test_single_tensor_forms():
    run_ranks(single_tensor_forms, 3)


def test_child_failed_error_and_record(tmp_path, monkeypatch):
    from tdist.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure, record

    child = tmp_path / "child.json"
    child.write_text(json.dumps({"message": {"message": "ValueError: boom",
                                             "extraInfo": {"py_callstack": "Traceback...\nValueError: boom",
                                                           "timestamp": "100"}}}))
    failures = {1: ProcessFailure(0, 123, 1, str(child)), 2: ProcessFailure(1, 124, -9, "")}
    e = ChildFailedError("trainer", failures)
    assert e.get_first_failure() == (1, failures[1])
    text = str(e)
    assert "trainer FAILED" in text and "Root Cause (first observed failure):" in text
    assert "ValueError: boom" in text and "(SIGKILL)" in text and "error_file: <N/A>" in text
    # @record in the parent: the child's error file becomes the parent's.
    mine = tmp_path / "parent.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(mine))

    @record
    def main():
        raise ChildFailedError("trainer", failures)

    with pytest.raises(ChildFailedError):
        main()
    assert json.loads(mine.read_text()) == json.loads(child.read_text())
    with pytest.raises(ValueError, match="at least one"):
        ChildFailedError("trainer", {})


class _ListlessStore(dist.Store):
    def __init__(self):
        super().__init__()


def store_list_keys_and_clone(rank, size, tmp_path):
    hs = dist.HashStore()
    hs.set("a", "1")
    hs.add("b", 2)
    assert sorted(hs.list_keys()) == ["a", "b"]
    twin = hs.clone()
    twin.set("c", b"3")
    assert hs.get("c") == b"3" and hs.num_keys() == 3
    prefixed = dist.PrefixStore("p", hs)
    prefixed.set("k", "v")
    assert prefixed.list_keys() == ["k"] and prefixed.clone().get("k") == b"v"
    tcp = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=WAIT_S), wait_for_workers=False)
    assert tcp.list_keys() == [] and tcp.num_keys() == 0
    tcp.set("x", "1")
    other = tcp.clone()
    other.set("y", "2")
    assert sorted(tcp.list_keys()) == ["x", "y"] and tcp.num_keys() == 2 and other.get("x") == b"1"
    fs = dist.FileStore(tmp_path + "/fs", -1)
    fs.set("f", "1")
    assert fs.clone().list_keys() == ["f"]
    with pytest.raises(dist.DistStoreError, match="cannot list its keys"):
        _ListlessStore().list_keys()
    with pytest.raises(dist.DistStoreError, match="cannot be cloned"):
        _ListlessStore().clone()


def test_store_list_keys_and_clone(tmp_path):
    run_ranks(store_list_keys_and_clone, 1, str(tmp_path))  # in a child: the stores' threads stay there


def world_names(rank, size):
    dist.init_process_group(init_method="env://", timeout=timedelta(seconds=WAIT_S))  # no backend: torch's "gloo"
    assert dist.get_backend() == "gloo" and dist.get_backend_config() == "cpu:gloo,cuda:gloo"
    assert dist.get_pg_count() == 1
    world = dist.group.WORLD
    assert world.group_desc == "default_pg" and world.bound_device_id is None
    pair = dist.new_group([0, 1], group_desc="pair")
    plain = dist.new_group([1, 2])
    assert dist.get_pg_count() == 3  # every rank counts every new_group, as torch
    if rank in (0, 1):
        assert pair.group_desc == "pair"
    if rank in (1, 2):
        assert plain.group_desc == "undefined"
    whole = dist.new_group()
    mine, subs = dist.new_subgroups(group_size=1, group=whole, group_desc="solo")
    assert len(subs) == size and mine.size() == 1 and mine.group_desc == "solo"
    mine, subs = dist.new_subgroups_by_enumeration([[0, 2], [1]], group_desc="enum")
    assert mine.group_desc == "enum" and mine.size() == (2 if rank != 1 else 1)
    assert dist.get_pg_count() == 1 + 3 + size + 2
    with pytest.raises(ValueError, match="must not exceed the world size"):
        dist.new_subgroups(group_size=size + 1)
    with pytest.raises(ValueError, match="has appeared in both subgroup"):
        dist.new_subgroups_by_enumeration([[0, 1], [1, 2]])

    # set_timeout: the group's and torch's free function; a non-member is refused.
    world.set_timeout(timedelta(seconds=50))
    assert world.timeout == timedelta(seconds=50)
    dist.set_timeout(timedelta(seconds=40))
    assert world.timeout == timedelta(seconds=40)
    if rank == 2:
        with pytest.raises(ValueError, match="Invalid process group specified"):
            dist.set_timeout(timedelta(seconds=5), group=pair)
    with pytest.raises(ValueError, match="negative"):
        world.set_timeout(timedelta(seconds=-1))
    dist.breakpoint(rank=-1, timeout_s=60)  # no rank stops; every rank meets at the barrier
    assert world.timeout == timedelta(seconds=60)
    # As torch's, on every group of the process, not only the default one.
    assert all(g.timeout == timedelta(seconds=60) for g in subs + [mine, whole] if isinstance(g, dist.ProcessGroup))
    if rank != 2:
        assert pair.timeout == timedelta(seconds=60)
    # skip counts the calls made while handling one exception (torch keys them on its traceback).
    stops = []
    real = pdb.Pdb.set_trace
    pdb.Pdb.set_trace = lambda self, frame=None: stops.append(frame)
    try:
        for _ in range(2):
            try:
                raise KeyError("a")
            except KeyError:
                dist.breakpoint(rank=rank, skip=1, timeout_s=None)
        dist.breakpoint(rank=rank, skip=1, timeout_s=None)  # no exception: a count of its own
    finally:
        pdb.Pdb.set_trace = real
    assert len(stops) == 1, stops  # only the second call in the except clause stops

    # The group's store is the group's namespace of the job's store.
    store = world.get_group_store()
    store.set(f"from{rank}", str(rank))
    assert store.get(f"from{(rank + 1) % size}") == str((rank + 1) % size).encode()

    # Objects: torch's use_batch and weights_only.
    if rank == 0:
        dist.send_object_list([{"a": 1}, [2, 3]], dst=1, use_batch=True)
        dist.send_object_list([types.SimpleNamespace(x=1)], dst=1)
    elif rank == 1:
        got = [None, None]
        assert dist.recv_object_list(got, src=0, use_batch=True, weights_only=True) == 0
        assert got == [{"a": 1}, [2, 3]]
        with pytest.raises(pickle.UnpicklingError, match="weights_only: .*types.SimpleNamespace"):
            dist.recv_object_list([None], src=0, weights_only=True)
    dist.barrier()
    dist.destroy_process_group()
    assert dist.get_pg_count() == 0


def test_world_names():
    run_ranks(world_names, 3)


def process_group_methods(rank, size):
    init()
    pg = dist.group.WORLD
    t = np.full(3, rank + 1.0)
    work = pg.allreduce([t])
    assert isinstance(work, dist.Work) and work.wait()
    assert (t == sum(range(1, size + 1))).all()
    t = np.array([rank], np.int64)
    pg.allreduce(t, types.SimpleNamespace(reduceOp=dist.ReduceOp.MAX, timeout=timedelta(seconds=30))).wait()
    assert t[0] == size - 1
    b = np.array([rank * 10], np.int64)
    pg.broadcast([b], types.SimpleNamespace(rootRank=1, rootTensor=0)).wait()
    assert b[0] == 10
    b[0] = rank
    pg.broadcast(b, 2).wait()  # torch's broadcast(tensor, root) form
    assert b[0] == 2
    outs = [np.zeros(2, np.int32) for _ in range(size)]
    pg.allgather([outs], [np.full(2, rank, np.int32)]).wait()
    assert [int(o[0]) for o in outs] == list(range(size))
    flat = np.zeros(size, np.int32)
    pg._allgather_base(flat, np.array([rank], np.int32)).wait()
    assert flat.tolist() == list(range(size))
    out = np.zeros(1, np.int64)
    pg.reduce_scatter([out], [[np.array([r + rank], np.int64) for r in range(size)]]).wait()
    assert out[0] == sum(rank + r for r in range(size))
    got = np.zeros(size, np.int64)
    pg.alltoall_base(got, np.full(size, rank, np.int64), [], []).wait()
    assert got.tolist() == list(range(size))
    pg.barrier().wait()
    msg = np.zeros(2, np.float32)
    if rank == 0:
        pg.send([np.full(2, 7, np.float32)], 1, 0).wait()
    elif rank == 1:
        pg.recv([msg], 0, 0).wait()
        assert (msg == 7).all()
    with pytest.raises(ValueError, match="expected one tensor"):
        pg.allreduce([t, t])
    # shutdown and abort: later operations fail, naming why.
    other = dist.new_group([1, 2])
    if rank in (1, 2):
        other.shutdown()
        with pytest.raises(dist.DistError):
            dist.all_reduce(np.ones(1), group=other)
    dist.barrier()
    pg.abort()
    with pytest.raises(dist.DistError, match=r"aborted \(ProcessGroup.abort\(\)\)|abort"):
        dist.all_reduce(np.ones(1))
    dist.destroy_process_group()


def test_process_group_methods():
    run_ranks(process_group_methods, 3)


class _StoreBackend:
    """A backend written in Python for the test: all_reduce, broadcast and barrier through the store."""

    def __init__(self, store, rank, size):
        self.store, self.rank, self.size, self.calls = store, rank, size, 0

    def _exchange(self, payload):
        self.calls += 1
        self.store.set(f"{self.calls}/{self.rank}", payload)
        return [self.store.get(f"{self.calls}/{r}") for r in range(self.size)]

    def allreduce(self, tensors, opts):
        assert opts.reduceOp == dist.ReduceOp.SUM and opts.timeout > timedelta(0)
        (t,) = tensors
        parts = self._exchange(t.tobytes())
        t[...] = sum(np.frombuffer(p, t.dtype).reshape(t.shape) for p in parts)

    def broadcast(self, tensors, opts):
        (t,) = tensors
        parts = self._exchange(t.tobytes())
        t[...] = np.frombuffer(parts[opts.rootRank], t.dtype).reshape(t.shape)
        return types.SimpleNamespace(wait=lambda: True)

    def barrier(self, opts):
        self._exchange(b"")


def python_backend(rank, size):
    created = []

    def create(store, r, world_size, timeout):
        assert isinstance(store, dist.Store) and isinstance(timeout, timedelta)
        created.append((r, world_size))
        return _StoreBackend(store, r, world_size)

    dist.Backend.register_backend("storebackend", create, devices=["cpu"])
    assert dist.Backend.STOREBACKEND == "storebackend" and dist.is_backend_available("storebackend")
    dist.init_process_group("storebackend", init_method="env://", timeout=timedelta(seconds=WAIT_S))
    assert dist.get_backend() == "storebackend" and created == [(rank, size)]
    t = np.full(4, rank + 1, np.int64)
    dist.all_reduce(t)
    assert (t == size * (size + 1) // 2).all()
    b = np.full(2, rank, np.float32)
    dist.broadcast(b, src=1)
    assert (b == 1).all()
    g = dist.new_group([0, 1])  # the default group's backend, also made by the creator
    if rank < 2:
        x = np.array([rank + 1], np.int64)
        dist.all_reduce(x, group=g)
        assert x[0] == 3
    with pytest.raises(dist.DistBackendError, match="storebackend.*has no method alltoall_base"):
        dist.all_to_all_single(np.zeros(size), np.zeros(size))
    dist.destroy_process_group()


def test_python_backend():
    run_ranks(python_backend, 3)


def mesh_names(rank, size):
    init()
    mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"), backend_override={"tp": "tdist"})
    assert dist.get_backend(mesh.get_group("tp")) == "tdist" and dist.get_backend(mesh.get_group("dp")) == "gloo"
    assert mesh.get_group("tp").size() == 2 and mesh.get_coordinate() == [rank // 2, rank % 2]
    flat = mesh._flatten()
    assert flat.mesh_dim_names == ("dp_tp",) and flat.mesh.tolist() == [0, 1, 2, 3]
    t = np.array([rank], np.int64)
    dist.all_reduce(t, group=flat.get_group())
    assert t[0] == 6
    dp = mesh["dp"]._flatten("dp_only")
    assert dp is not None and mesh["dp"]._flatten("dp") is not None
    # As torch's, a flattened dimension is kept on the root mesh: sliced by its name, its group by
    # name, the same mesh again for the same dimensions, refused for others or a root's name.
    assert mesh["dp_tp"] is flat and mesh._flatten() is flat and mesh._flatten("dp_tp") is flat
    assert mesh.get_group("dp_tp").size() == 4
    assert mesh["dp_only"] is dp and dp._get_root_mesh() is mesh and mesh["tp"]._get_root_mesh() is mesh
    assert mesh["tp"].get_group("dp_only").size() == 2  # a sub-mesh finds its root's flattened dimensions
    tp_flat = mesh["tp"]._flatten("tp_rows")
    assert mesh["tp_rows"] is tp_flat and tp_flat.mesh.tolist() == [rank // 2 * 2, rank // 2 * 2 + 1]
    with pytest.raises(ValueError, match="has been created before"):
        mesh["tp"]._flatten("dp_tp")
    with pytest.raises(ValueError, match="tp already exists"):
        mesh["dp"]._flatten("tp")
    with pytest.raises(RuntimeError, match="taken alone"):
        mesh["dp_tp", "tp"]
    with pytest.raises(RuntimeError, match="redundant dim index 0 and name dp"):
        dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"), backend_override={0: "gloo", "dp": "gloo"})
    with pytest.raises(RuntimeError, match="invalid keys in backend_override"):
        dist.init_device_mesh("cpu", (4,), backend_override={3: "gloo"})
    with pytest.raises(RuntimeError, match="without mesh_dim_names"):
        dist.init_device_mesh("cpu", (4,))._flatten()
    dist.destroy_process_group()


def test_device_mesh_flatten_and_backend_override():
    run_ranks(mesh_names, 4)
