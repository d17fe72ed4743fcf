"""Point-to-point: send/recv (any source), isend/irecv, batch_isend_irecv, tags; a recv that
times out names the peer; the GIL is released while a rank waits."""
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import pytest

import tdist as dist
from conftest import WAIT_S, init, run_ranks


def p2p(rank, size):
    init()
    # Ring of blocking send/recv (even ranks send first).
    right, left = (rank + 1) % size, (rank - 1) % size
    out = np.full(5, rank, np.int32)
    got = np.zeros(5, np.int32)
    if rank % 2 == 0:
        dist.send(out, dst=right)
        assert dist.recv(got, src=left) == left
    else:
        assert dist.recv(tensor=got, src=left) == left
        dist.send(tensor=out, dst=right)
    assert np.all(got == left)
    # Any source: rank 0 learns who sent each message.
    if rank == 0:
        senders = set()
        for _ in range(size - 1):
            buf = np.zeros(1, np.int64)
            sender = dist.recv(buf)
            assert buf[0] == sender * 10
            senders.add(sender)
        assert senders == set(range(1, size))
    else:
        dist.send(np.array([rank * 10], np.int64), dst=0)
    # isend/irecv with tags, waited out of order.
    works, bufs = [], []
    for peer in range(size):
        if peer == rank:
            continue
        for tag in (1, 2):
            works.append(dist.isend(np.full(3, rank * 100 + tag, np.float64), peer, tag=tag))
            b = np.zeros(3, np.float64)
            bufs.append((peer, tag, b))
            works.append(dist.irecv(b, src=peer, tag=tag))
    for w in reversed(works):
        w.wait()
        assert w.is_completed()
    for peer, tag, b in bufs:
        assert np.all(b == peer * 100 + tag)
    # irecv from any source reports the sender.
    if rank == 1:
        b = np.zeros(2, np.float32)
        w = dist.irecv(b)
        w.wait()
        assert w.source_rank() == 0 and np.all(b == 7)
    elif rank == 0:
        dist.send(np.full(2, 7, np.float32), dst=1)
    # batch_isend_irecv round the ring; receives are posted first, so any order is safe.
    send = np.full(4, rank, np.int16)
    recv = np.zeros(4, np.int16)
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert np.all(recv == left)
    # group_dst/group_src in a group of the odd ranks.
    odd = dist.new_group([r for r in range(size) if r % 2 == 1])
    if size >= 4 and rank in (1, 3):
        b = np.array([rank], np.int32)
        if rank == 1:
            dist.send(b, group_dst=1, group=odd)
        else:
            assert dist.recv(b, group_src=0, group=odd) == 1 and b[0] == 1
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, 4])
def test_point_to_point(world_size):
    run_ranks(p2p, world_size)


def recv_timeout(rank, size, store_path):
    # Short, so that the test is quick; long enough for the rendezvous on a loaded machine.
    init(timeout=timedelta(seconds=3))
    store = dist.FileStore(store_path, 2)
    if rank == 0:
        with pytest.raises(dist.DistError) as err:
            dist.recv(np.zeros(4, np.float32), src=1)
        msg = str(err.value)
        assert "rank 1" in msg and "recv" in msg, msg
        store.set("done", "1")
    else:
        store.wait(["done"], timedelta(seconds=WAIT_S))  # stay alive (and silent) until rank 0 is done
    sys.stdout.flush()
    # The group may have failed for good: exit without a collective.


def test_recv_timeout_names_the_peer(tmp_path):
    run_ranks(recv_timeout, 2, str(tmp_path / "store"))


def work_wait_timeout(rank, size, store_path):
    init()
    store = dist.FileStore(store_path, 2)
    if rank == 0:
        buf = np.zeros(1, np.float32)
        work = dist.irecv(buf, src=1)
        with pytest.raises(dist.DistBackendError, match="recv"):
            work.wait(timeout=timedelta(milliseconds=100))
        assert not work.is_completed()
        store.set("send now", "1")
        work.wait()  # the operation went on and now completes
        assert buf[0] == 42
    else:
        store.wait(["send now"], timedelta(seconds=WAIT_S))
        dist.send(np.array([42], np.float32), dst=0)
    dist.destroy_process_group()


def test_work_wait_timeout(tmp_path):
    run_ranks(work_wait_timeout, 2, str(tmp_path / "store"))


def gil_released(rank, size, store_path):
    """Rank 1 blocks in recv; a Python thread of rank 1 must run meanwhile, and it is that thread
    which tells rank 0 (through a store) to send. If recv held the GIL, the thread could never
    run and recv would end in its timeout instead."""
    init()
    store = dist.FileStore(store_path, 2)
    if rank == 1:
        main_id = threading.get_ident()
        recv_line = None
        seen = []

        def watcher():
            # Wait until the main thread is inside the recv call (its frame sits on that line).
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                frame = sys._current_frames().get(main_id)
                if frame is not None and frame.f_lineno == recv_line:
                    seen.append(sum(range(10000)))  # real Python work while recv blocks
                    store.set("go", "1")
                    return
                time.sleep(0.001)

        buf = np.zeros(3, np.float64)
        recv_line = sys._getframe().f_lineno + 3
        t = threading.Thread(target=watcher)
        t.start()
        dist.recv(buf, src=0)  # recv_line
        t.join()
        assert seen and np.all(buf == 5)
    else:
        store.wait(["go"], timedelta(seconds=WAIT_S))  # store waits release the GIL too
        dist.send(np.full(3, 5, np.float64), dst=1)
    dist.destroy_process_group()


def test_gil_released_during_recv(tmp_path):
    run_ranks(gil_released, 2, str(tmp_path / "store"))
