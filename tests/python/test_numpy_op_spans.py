"""tdist.op_spans (operations as they finish, collected or handed to a callback) and the flight
recorder's Python API (flight_recorder, flight_recorder_json, dump_flight_recorder), on 2 ranks."""
import json
import os
import sys

import numpy as np
import pytest

import tdist as dist
from conftest import init, run_ranks


def spans_collected(rank, size):
    init()
    peer = 1 - rank
    with dist.op_spans() as spans:
        dist.all_reduce(np.ones((3, 5), np.float32))
        dist.broadcast(np.arange(4, dtype=np.int64), src=0)
        dist.all_gather([np.empty((2, 3), np.float64) for _ in range(size)], np.full((2, 3), rank, np.float64))
        if rank == 0:
            dist.send(np.arange(7, dtype=np.int32), dst=peer)
        else:
            dist.recv(np.empty(7, np.int32), src=peer)
        work = dist.all_reduce(np.ones(8, np.float32), async_op=True)
        work.wait()
        # A collective's span is there once its wait has returned.
        assert [s.name for s in spans][-1] == "all_reduce"
        sent = dist.isend(np.ones(2, np.float16), dst=peer) if rank == 0 else None
        received = dist.irecv(np.empty(2, np.float16), src=peer) if rank == 1 else None
        (sent if rank == 0 else received).wait()
    seen = len(spans)
    dist.barrier()
    dist.all_reduce(np.ones(1, np.float32))
    assert len(spans) == seen, "the observer outlived its with block"

    names = [s.name for s in spans]
    assert names == ["all_reduce", "broadcast", "all_gather", "send" if rank == 0 else "recv", "all_reduce",
                     "send" if rank == 0 else "recv"], names
    reduce, bcast, gather, p2p, async_reduce, async_p2p = spans
    for s in spans:
        assert isinstance(s, dist.OpSpan)
        assert s.state == "completed" and s.error == "", s
        assert s.group == reduce.group and s.group
        assert s.engine or s.p2p, s  # the tdist backend names the engine that ran a collective
        # Times: the system clock, in µs; an end no earlier than the start (within their resolution).
        assert s.start_us > 10**15 and s.end_us > 0, s
        assert s.end_us + s.time_resolution_us >= s.start_us, s
        assert s.duration_us >= 0
    # Collectives number 1, 2, 3 ... in issue order; point-to-point operations have their own count.
    assert [bcast.seq, gather.seq, async_reduce.seq] == [reduce.seq + 1, reduce.seq + 2, reduce.seq + 3]
    assert not reduce.p2p and p2p.p2p and async_p2p.p2p and async_p2p.seq == p2p.seq + 1
    assert (reduce.dtype, reduce.shapes, reduce.bytes, reduce.reduce_op) == ("float32", ((3, 5),), 60, "sum")
    assert (bcast.dtype, bcast.shapes, bcast.bytes, bcast.root) == ("int64", ((4,),), 32, 0)
    assert (gather.dtype, gather.shapes, gather.bytes) == ("float64", ((2, 3),), 48)
    assert gather.out_shapes == ((2, 3),) * size
    assert (p2p.dtype, p2p.shapes, p2p.bytes, p2p.peer) == ("int32", ((7,),), 28, peer)
    assert (async_reduce.shapes, async_p2p.dtype, async_p2p.peer) == (((8,),), "float16", peer)
    dist.destroy_process_group()


def test_op_spans_collects_each_operation():
    run_ranks(spans_collected, 2)


def spans_to_callback(rank, size):
    init()
    seen, unraisable = [], []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        def callback(span):
            seen.append(span)
            if span.name == "broadcast":
                raise ValueError("observer failed on purpose")

        with dist.op_spans(callback) as nothing:
            assert nothing is None
            t = np.ones(3, np.float32)
            dist.all_reduce(t)
            dist.broadcast(t, src=1)
            work = dist.all_reduce(t, async_op=True)
            work.wait()
        dist.all_reduce(t)
    finally:
        sys.unraisablehook = old_hook
    # The exception reached sys.unraisablehook, not the operation, and later spans still came.
    assert [s.name for s in seen] == ["all_reduce", "broadcast", "all_reduce"]
    assert np.all(t == 2 * 2 * 2), t
    assert len(unraisable) == 1 and isinstance(unraisable[0].exc_value, ValueError), unraisable
    assert "observer failed on purpose" in str(unraisable[0].exc_value)
    dist.destroy_process_group()


def test_op_spans_callback_and_its_errors():
    run_ranks(spans_to_callback, 2)


def recorder_read_and_dumped(rank, size, tmp):
    for name in ("TDIST_FLIGHT_RECORDER_DIR", "TORCH_FR_DUMP_TEMP_FILE"):
        os.environ.pop(name, None)
    init()
    dist.all_reduce(np.ones((2, 2), np.float32))
    dist.broadcast(np.zeros(3, np.int32), src=0)

    text = dist.flight_recorder_json()
    assert isinstance(text, str)
    doc = dist.flight_recorder()
    assert doc["rank"] == rank and doc["world_size"] == size and doc["reason"] == "request"
    (group,) = [g for g in doc["groups"] if g["entries"]]
    ops = [(e["op"], e["dtype"], e["shapes"]) for e in group["entries"]]
    assert ops[-2:] == [("all_reduce", "float32", [[2, 2]]), ("broadcast", "int32", [[3]])], ops

    # To a path, or to this rank's file in the configured folder; neither: an error saying so.
    path = dist.dump_flight_recorder(os.path.join(tmp, "mine_%d.json" % rank))
    assert path == os.path.join(tmp, "mine_%d.json" % rank)
    with open(path) as f:
        assert json.load(f)["groups"][0]["entries"][-1]["op"] == "broadcast"
    with pytest.raises(dist.DistValueError, match="TDIST_FLIGHT_RECORDER_DIR"):
        dist.dump_flight_recorder()
    os.environ["TDIST_FLIGHT_RECORDER_DIR"] = tmp
    assert dist.dump_flight_recorder() == os.path.join(tmp, "tdist_fr_%d.json" % rank)
    dist.destroy_process_group()


def test_flight_recorder_api(tmp_path):
    run_ranks(recorder_read_and_dumped, 2, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["mine_0.json", "mine_1.json", "tdist_fr_0.json", "tdist_fr_1.json"]
